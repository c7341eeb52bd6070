//! Pseudo-terminals of interactive jobs (`bsub -Ip`, `-Is`): [`open_pty`] makes a pair whose
//! terminal side belongs to the job's user, [`set_window_size`] passes the size of `bsub`'s
//! terminal on (the kernel then sends SIGWINCH to the job's foreground process group),
//! [`foreground_group`] finds where `bsub -Ip`'s Ctrl-C and Ctrl-Z go, and
//! [`set_nonblocking`] serves the relay ([`crate::relay`]). The job's process makes the
//! terminal its controlling terminal itself, after `setsid` ([`super::spawn_gated`]).

use super::*;

/// The two sides of a pseudo-terminal; both close on exec.
#[derive(Debug)]
pub struct Pty {
    /// The side the shepherd reads the job's output from and writes its input to.
    pub master: OwnedFd,
    /// The terminal the job runs on (`/dev/pts/N`).
    pub slave: OwnedFd,
}

/// A new pseudo-terminal of `rows` × `cols` (0 × 0: the kernel's default) whose terminal
/// side is owned by `uid` with mode 0620, as `login` leaves a user's terminal.
pub fn open_pty(uid: u32, rows: u16, cols: u16) -> io::Result<Pty> {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    // SAFETY: winsize is plain data; zeroed is a valid value.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    size.ws_row = rows;
    size.ws_col = cols;
    // SAFETY: openpty writes two descriptors through the valid pointers; a null name and
    // termios are allowed; the winsize pointer is valid for the call.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by openpty and are owned by nobody else.
    let pty = unsafe { Pty { master: OwnedFd::from_raw_fd(master), slave: OwnedFd::from_raw_fd(slave) } };
    for fd in [&pty.master, &pty.slave] {
        // SAFETY: F_SETFD on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let slave = std::fs::File::from(pty.slave);
    std::os::unix::fs::fchown(&slave, Some(uid), None)?;
    slave.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o620))?;
    Ok(Pty { master: pty.master, slave: OwnedFd::from(slave) })
}

/// The foreground process group of the terminal behind `fd` (a pseudo-terminal's master):
/// where `bsub -Ip`'s interrupt and suspend keys go.
pub fn foreground_group(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<i32> {
    // SAFETY: tcgetpgrp only reads the descriptor's terminal state.
    let pgrp = unsafe { libc::tcgetpgrp(fd.as_raw_fd()) };
    if pgrp < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pgrp)
}

/// Sets the window size of the terminal behind `fd` (a pseudo-terminal's master).
pub fn set_window_size(fd: std::os::fd::BorrowedFd<'_>, rows: u16, cols: u16) -> io::Result<()> {
    // SAFETY: winsize is plain data; zeroed is a valid value.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    size.ws_row = rows;
    size.ws_col = cols;
    // SAFETY: TIOCSWINSZ reads one winsize through the valid pointer.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes reads and writes of `fd` return `WouldBlock` instead of waiting.
pub fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL on an open descriptor.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Waits at most `timeout_ms` (negative: without limit) until one of `fds` is ready for
/// its own events; returns each descriptor's returned events (all zero on timeout).
/// Retries on EINTR.
pub fn poll_each(fds: &[(std::os::fd::BorrowedFd<'_>, i16)], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut entries: Vec<libc::pollfd> = fds
        .iter()
        .map(|(fd, events)| libc::pollfd { fd: fd.as_raw_fd(), events: *events, revents: 0 })
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a pseudo-terminal opens with the size asked for, its terminal side is a tty
    // named /dev/pts/N, and a new size is seen on that side.
    #[test]
    fn a_pty_opens_with_its_size() {
        let uid = effective_uid();
        let pty = open_pty(uid, 24, 80).expect("openpty");
        let slave = std::fs::File::from(pty.slave);
        let name = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd())).expect("link");
        assert!(name.to_string_lossy().starts_with("/dev/pts/"), "{name:?}");
        set_window_size(std::os::fd::AsFd::as_fd(&pty.master), 50, 132).expect("TIOCSWINSZ");
        // SAFETY: winsize is plain data; TIOCGWINSZ writes one through the valid pointer.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: as above, on the terminal side we own.
        assert_eq!(unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCGWINSZ, &mut size) }, 0);
        assert_eq!((size.ws_row, size.ws_col), (50, 132));
    }
}
