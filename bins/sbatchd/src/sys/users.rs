//! The password and group databases ([`lookup_user`], [`lookup_uid`], [`group_list`]) and
//! a process's change of identity for good ([`become_user`], [`end_after`]: `bpeek`'s
//! reader, [`crate::peek`]).

use super::*;

/// A user account as the password database describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAccount {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

fn text(ptr: *const libc::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: getpwnam_r/getpwuid_r fill NUL-terminated strings inside our buffer.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

fn lookup_with(
    call: impl Fn(*mut libc::passwd, *mut libc::c_char, usize, *mut *mut libc::passwd) -> libc::c_int,
) -> io::Result<Option<UserAccount>> {
    let mut buf_len = 4096usize;
    loop {
        let mut buf = vec![0 as libc::c_char; buf_len];
        // SAFETY: passwd is plain data; zeroed is a valid value.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut entry, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc == libc::ERANGE && buf_len < 1 << 20 {
            buf_len *= 4;
            continue;
        }
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if result.is_null() {
            return Ok(None);
        }
        return Ok(Some(UserAccount {
            name: text(entry.pw_name),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
            home: text(entry.pw_dir),
            shell: text(entry.pw_shell),
        }));
    }
}

/// Looks a user up by name; `Ok(None)` when there is no such user.
pub fn lookup_user(name: &str) -> io::Result<Option<UserAccount>> {
    let name =
        CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in user name"))?;
    // SAFETY: every pointer is valid for the duration of the call; buffer length is passed.
    lookup_with(|entry, buf, len, result| unsafe { libc::getpwnam_r(name.as_ptr(), entry, buf, len, result) })
}

/// Looks a user up by uid; `Ok(None)` when there is no such user.
pub fn lookup_uid(uid: u32) -> io::Result<Option<UserAccount>> {
    // SAFETY: every pointer is valid for the duration of the call; buffer length is passed.
    lookup_with(|entry, buf, len, result| unsafe { libc::getpwuid_r(uid, entry, buf, len, result) })
}

/// The supplementary groups of `user` (with `gid` included), as initgroups would set them.
pub fn group_list(user: &str, gid: u32) -> io::Result<Vec<u32>> {
    let name =
        CString::new(user).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in user name"))?;
    let mut count: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; count as usize];
        let mut n = count;
        // SAFETY: groups has room for n entries; getgrouplist updates n.
        let rc =
            unsafe { libc::getgrouplist(name.as_ptr(), gid as libc::gid_t, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return Ok(groups.into_iter().collect());
        }
        if n <= count || n > 65_536 {
            return Err(io::Error::other(format!("cannot list the groups of {user}")));
        }
        count = n;
    }
}

/// Makes this whole process the user `uid` for good: supplementary groups `groups`, then
/// real, effective and saved gid `gid`, then real, effective and saved uid `uid`; then
/// checks that every id took and, for a `uid` other than 0, that root cannot be taken
/// back. For `bpeek`'s reader ([`crate::peek`]), a short-lived process that must see the
/// file system exactly as the job's user does. Needs CAP_SETUID and CAP_SETGID (root).
pub fn become_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    let groups: Vec<libc::gid_t> = groups.iter().map(|g| *g as libc::gid_t).collect();
    // SAFETY: setgroups reads `groups.len()` gids from a valid array.
    if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setresgid takes plain integers.
    if unsafe { libc::setresgid(gid, gid, gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setresuid takes plain integers.
    if unsafe { libc::setresuid(uid, uid, uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut ruid, mut euid, mut suid) = (0, 0, 0);
    let (mut rgid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: getresuid and getresgid write one id through each valid pointer.
    let read = unsafe {
        libc::getresuid(&mut ruid, &mut euid, &mut suid) == 0
            && libc::getresgid(&mut rgid, &mut egid, &mut sgid) == 0
    };
    if !read || [ruid, euid, suid] != [uid; 3] || [rgid, egid, sgid] != [gid; 3] {
        return Err(io::Error::other("the new identity did not take"));
    }
    // SAFETY: setuid takes a plain integer; it must fail here.
    if uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("root could be taken back"));
    }
    Ok(())
}

/// Has the kernel end this process (SIGALRM, whose default action is to terminate) after
/// `seconds`, whatever it is waiting for then: `bpeek`'s reader's own bound, which holds
/// even when sbatchd is gone and cannot kill it.
pub fn end_after(seconds: u32) {
    // SAFETY: alarm takes a plain integer and only arms this process's timer.
    unsafe { libc::alarm(seconds) };
}
