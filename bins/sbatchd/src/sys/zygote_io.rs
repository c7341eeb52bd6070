//! The system calls of the shepherd zygote ([`crate::zygote`]) and its channel to sbatchd:
//! messages with descriptors over a `SOCK_SEQPACKET` pair ([`seqpacket_pair`],
//! [`send_with_fds`], [`recv_with_fds`]), [`poll`], [`file_type`], [`fork`] from a
//! single-threaded process, reaping ended children, SIGCHLD through a signalfd, and closing
//! every inherited descriptor but a few.

use super::*;

/// A connected pair of `AF_UNIX` `SOCK_SEQPACKET` sockets, both close-on-exec: the channel
/// between sbatchd and its shepherd zygote (message boundaries kept, descriptors passed
/// with `SCM_RIGHTS`).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills the two-element array on success.
    let rc = unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for the control message of `n_fds` descriptors, in `u64`s (aligned for `cmsghdr`).
fn control_words(n_fds: usize) -> usize {
    let fd_bytes = u32::try_from(n_fds * std::mem::size_of::<RawFd>()).unwrap_or(u32::MAX);
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let bytes = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    bytes.div_ceil(std::mem::size_of::<u64>())
}

/// Sends `bytes` as one message on the seqpacket `socket`, with copies of `fds` attached
/// (`SCM_RIGHTS`; none when empty). `MSG_NOSIGNAL`: a peer that is gone is EPIPE, not a
/// signal. A message is sent whole or not at all.
pub fn send_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    let mut control = vec![0u64; if fds.is_empty() { 0 } else { control_words(fds.len()) }];
    let mut iov = libc::iovec { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid (empty) value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        let fd_bytes = fds.len() * std::mem::size_of::<RawFd>();
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = control.len() * std::mem::size_of::<u64>();
        // SAFETY: the control buffer has room for one cmsghdr with `fds.len()` descriptors
        // (control_words), so CMSG_FIRSTHDR is not null and CMSG_DATA points inside it; the
        // copy writes exactly fd_bytes there.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
            let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
            std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), fd_bytes);
        }
    }
    loop {
        // SAFETY: message points to a valid iovec and control buffer that outlive the call;
        // the descriptors named are open (borrowed for the call).
        let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One message received by [`recv_with_fds`].
#[derive(Debug)]
pub struct Received {
    /// Bytes placed in the buffer (0 with no descriptors: the peer has closed its end).
    pub len: usize,
    /// The descriptors attached (close-on-exec, owned: dropping one closes it).
    pub fds: Vec<OwnedFd>,
    /// The message was longer than the buffer; the rest is lost (`MSG_TRUNC`).
    pub truncated: bool,
    /// More descriptors were attached than asked for; the extra ones were closed by the
    /// kernel (`MSG_CTRUNC`).
    pub fds_truncated: bool,
}

/// Receives one message from the seqpacket `socket` into `buf`, with at most `fds_max`
/// attached descriptors (`MSG_CMSG_CLOEXEC`). Blocks until a message or end-of-file.
/// Whatever arrives, every descriptor received is owned by the result, so none leaks.
pub fn recv_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    fds_max: usize,
) -> io::Result<Received> {
    let mut control = vec![0u64; control_words(fds_max.max(1))];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid (empty) value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    // Room for fds_max descriptors exactly (CMSG_LEN, not the padded CMSG_SPACE, which may
    // hold one more): any more are MSG_CTRUNC, and the kernel closes them.
    message.msg_controllen = if fds_max == 0 {
        0
    } else {
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        unsafe { libc::CMSG_LEN((fds_max * std::mem::size_of::<RawFd>()) as u32) as usize }
    };
    let len = loop {
        // SAFETY: message points to a valid iovec over `buf` and a control buffer of at
        // least msg_controllen bytes, both outliving the call.
        let got = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if got >= 0 {
            break got as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    let mut fds = Vec::new();
    if message.msg_controllen > 0 {
        // SAFETY: the kernel filled msg_controllen bytes of the control buffer with
        // well-formed control messages; CMSG_FIRSTHDR/CMSG_NXTHDR stay within them, and an
        // SCM_RIGHTS message's data holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors that
        // the kernel installed in this process for us alone.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&message);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(header);
                    let n = ((*header).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for idx in 0..n {
                        let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(idx));
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                header = libc::CMSG_NXTHDR(&message, header);
            }
        }
    }
    Ok(Received {
        len,
        fds,
        truncated: message.msg_flags & libc::MSG_TRUNC != 0,
        fds_truncated: message.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

/// Waits at most `timeout_ms` (negative: without limit) until one of `fds` is ready for
/// `events` (`POLLIN`, ...); returns each descriptor's returned events (all zero on
/// timeout). Retries on EINTR with the full timeout again (callers bound their own total).
pub fn poll(fds: &[std::os::fd::BorrowedFd<'_>], events: i16, timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut entries: Vec<libc::pollfd> =
        fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 }).collect();
    loop {
        // SAFETY: entries is a valid array of entries.len() pollfd structures.
        let rc = unsafe { libc::poll(entries.as_mut_ptr(), entries.len() as libc::nfds_t, timeout_ms) };
        if rc >= 0 {
            return Ok(entries.iter().map(|entry| entry.revents).collect());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The kind of file a descriptor refers to (`st_mode & S_IFMT` of fstat: `libc::S_IFDIR`,
/// `S_IFIFO`, `S_IFREG`, ...).
pub fn file_type(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: stat is plain data; zeroed is a valid value.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat structure through the valid pointer; the fd is open.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.st_mode & libc::S_IFMT)
}

/// Who this process is after [`fork`].
#[derive(Debug, PartialEq, Eq)]
pub enum Forked {
    /// The new process.
    Child,
    /// The calling process; the child's pid.
    Parent(i32),
}

/// Number of threads of this process (`Threads:` of /proc/self/status).
pub fn thread_count() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Threads line in /proc/self/status"))
}

/// Forks this process (glibc's fork: its at-fork handlers keep malloc and stdio usable in
/// the child).
///
/// Must only be called from a single-threaded process (the shepherd zygote checks
/// [`thread_count`] at start and never creates a thread): the child then holds no lock
/// another thread held, and may do anything the parent could, as the shepherd does.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: the caller is single-threaded (see above), so the child is a complete copy
    // of the only thread, with no lock held by a thread that does not exist in it.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Collects every ended child without waiting (`waitpid(-1, WNOHANG)` until none is
/// left); returns how many. Only for a process all of whose children are its own to reap
/// (the zygote): it takes any child's status.
pub fn reap_ended_children() -> usize {
    let mut n = 0;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: a valid pointer to a local status.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            n += 1;
            continue;
        }
        if pid < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        // 0: children remain, none ended; ECHILD: no children at all.
        return n;
    }
}

/// A signal mask, as [`block_child_signal`] found it.
pub struct SignalMask(libc::sigset_t);

impl std::fmt::Debug for SignalMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalMask")
    }
}

fn child_signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset initialise and change it
    // through a valid pointer (SIGCHLD is a valid signal, so neither fails).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

/// Blocks SIGCHLD in the calling thread (for [`child_signal_fd`]) and returns the mask as
/// it was, for [`restore_signal_mask`] in a child.
pub fn block_child_signal() -> io::Result<SignalMask> {
    let set = child_signal_set();
    // SAFETY: sigset_t is plain data; zeroed is a valid value.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(SignalMask(old))
}

/// Sets the calling thread's signal mask back to `mask`.
pub fn restore_signal_mask(mask: &SignalMask) -> io::Result<()> {
    // SAFETY: a valid pointer to an initialised sigset_t; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A signalfd (close-on-exec, non-blocking) that becomes readable when SIGCHLD is pending:
/// how the zygote learns, in its poll loop, that a child has ended. SIGCHLD must be
/// blocked ([`block_child_signal`]).
pub fn child_signal_fd() -> io::Result<OwnedFd> {
    let set = child_signal_set();
    // SAFETY: signalfd with -1 creates a new descriptor for the valid set.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads every pending signal off a signalfd (non-blocking), so that poll waits again.
pub fn drain_signal_fd(fd: std::os::fd::BorrowedFd<'_>) {
    // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    loop {
        // SAFETY: reading at most one structure into a valid local.
        let n =
            unsafe { libc::read(fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        if n <= 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Closes every descriptor from 3 up except those in `keep` (close_range over the gaps):
/// a process forked by the zygote keeps only its own job's descriptors.
pub fn close_descriptors_except(keep: &[RawFd]) -> io::Result<()> {
    let mut kept: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= 3).collect();
    kept.sort_unstable();
    kept.dedup();
    let mut first: libc::c_uint = 3;
    for fd in kept.into_iter().map(|fd| fd as libc::c_uint).chain(std::iter::once(libc::c_uint::MAX)) {
        if fd > first {
            // SAFETY: close_range only closes descriptors; none in [first, fd - 1] is
            // owned by anything this process still uses (the caller's contract).
            if unsafe { libc::close_range(first, fd - 1, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        first = fd.saturating_add(1);
    }
    Ok(())
}
