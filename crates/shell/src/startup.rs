//! The start-up steps the daemons repeat: binding the listening socket ([`listen`]),
//! clearing a stale port or ready file before it ([`remove_stale`]) and writing it once the
//! daemon serves ([`write_atomically`]), making an event log's private folder
//! ([`create_private_dir`]) and logging what opening the log found ([`log_open_report`]),
//! and the errors that name what failed ([`PathError`], [`ListenError`]) for the daemons'
//! own error types to wrap.
//!
//! It owns only these mechanics. It never decides what a file holds, when it is written (a
//! port or ready file says the daemon serves, so it comes after the listener and the
//! recovery), which address a daemon listens on, where its log lives, or how a daemon
//! reports a failure.

use std::ffi::OsString;
use std::fs::{self, DirBuilder, File};
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use lava_eventlog::OpenReport;
use tokio::net::{TcpListener, TcpSocket};

/// Connections the kernel queues before the daemon accepts them.
pub const LISTEN_BACKLOG: u32 = 1024;

/// A file or folder operation that failed: what was being done, on which path, and the OS
/// error. Its text is complete (`write /run/x.port.tmp: Permission denied (os error 13)`),
/// so it exposes no `source()`: printed through a chain (`anyhow`'s `{:#}`), the OS error is
/// not repeated.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {error}", path.display())]
pub struct PathError {
    /// What was being done ("write", "create the WAL folder", ...).
    pub what: &'static str,
    /// The file or folder.
    pub path: PathBuf,
    /// The OS error.
    pub error: io::Error,
}

impl PathError {
    /// `what` failed on `path` with `error`.
    pub fn new(what: &'static str, path: impl Into<PathBuf>, error: io::Error) -> PathError {
        PathError { what, path: path.into(), error }
    }

    /// The error for `map_err`: `what` on `path`.
    pub fn at(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> PathError + use<> {
        let path = path.to_owned();
        move |error| PathError { what, path, error }
    }
}

/// The listening socket could not be set up. Like [`PathError`], its text is complete.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {error}")]
pub struct ListenError {
    /// The address.
    pub addr: SocketAddr,
    /// The OS error.
    pub error: io::Error,
}

/// A TCP listener on `addr` with SO_REUSEADDR (a restarted daemon rebinds its port at once,
/// even while connections of the old one linger in TIME_WAIT) and a backlog of
/// [`LISTEN_BACKLOG`], with the address it is bound to (`addr`'s port 0 becomes the
/// kernel's choice). Must be called inside a tokio runtime.
pub fn listen(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ListenError> {
    let error = |error| ListenError { addr, error };
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(error)?;
    socket.set_reuseaddr(true).map_err(error)?;
    socket.bind(addr).map_err(error)?;
    let listener = socket.listen(LISTEN_BACKLOG).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    Ok((listener, bound))
}

/// Removes `path` if it exists: a port or ready file left by an earlier run must not be
/// taken for this one's before it serves.
pub fn remove_stale(path: &Path) -> Result<(), PathError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(PathError::new("remove the stale file", path, error)),
    }
}

/// Writes `text` to `path` atomically: a temporary file beside it (`path` with `.tmp`
/// appended), fsynced, then renamed over `path`. Whoever polls `path` sees it whole or not
/// at all.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), PathError> {
    let mut temp = OsString::from(path.as_os_str());
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    fs::write(&temp, text).map_err(PathError::at("write", &temp))?;
    File::open(&temp).and_then(|file| file.sync_all()).map_err(PathError::at("sync", &temp))?;
    fs::rename(&temp, path).map_err(PathError::at("rename into place", path))
}

/// Makes `dir`, an event log's folder, private (mode 0700, left as it is when it exists)
/// and its parents if missing (mode 0755: `LSB_SHAREDIR/<cluster>` is shared with the other
/// daemons, and sbatchd's job folders below it must stay reachable by job users). `what`
/// names the step for the error ("create the WAL folder"); a parent's error says "create
/// the work folder".
pub fn create_private_dir(dir: &Path, what: &'static str) -> Result<(), PathError> {
    if let Some(parent) = dir.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(PathError::at("create the work folder", parent))?;
    }
    DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .or_else(|error| match error.kind() {
            io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(error),
        })
        .map_err(PathError::at(what, dir))
}

/// Logs each finding of opening the log in `dir` (a torn tail that was cut off, rejected
/// snapshots, leftover files) as `<label>: <finding>`, a warning or an information as the
/// log rates it.
pub fn log_open_report(dir: &Path, report: &OpenReport, label: &str) {
    for finding in report.findings() {
        if finding.warning {
            tracing::warn!(dir = %dir.display(), "{label}: {}", finding.text);
        } else {
            tracing::info!(dir = %dir.display(), "{label}: {}", finding.text);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use std::os::unix::fs::PermissionsExt;

    use super::{create_private_dir, listen, remove_stale, write_atomically};

    // Goal: the log's folder is private, its missing parents are made, an existing folder
    // is taken as it is, and a parent that cannot be made is named as the work folder.
    #[test]
    fn the_log_folder_is_private_and_its_parents_are_made() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("share/cluster/logdir");
        create_private_dir(&dir, "create the event log folder").expect("create");
        let mode =
            |path: &std::path::Path| std::fs::metadata(path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert!(dir.parent().expect("parent").is_dir());
        create_private_dir(&dir, "create the event log folder").expect("again");
        let file = root.path().join("file");
        std::fs::write(&file, "").expect("file");
        let error = create_private_dir(&file.join("logdir"), "create the event log folder")
            .expect_err("parent is a file");
        assert!(error.to_string().starts_with("create the work folder "), "{error}");
    }

    // Goal: the file appears whole under its name, no temporary file stays, a second write
    // replaces it, and removing it twice is no error; a failure names the step and the path.
    #[test]
    fn writes_atomically_and_removes_what_is_stale() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("daemon.port");
        write_atomically(&path, "6881\n").expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "6881\n");
        write_atomically(&path, "6882\n").expect("write again");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "6882\n");
        let names: Vec<_> =
            std::fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(names, ["daemon.port"]);
        remove_stale(&path).expect("remove");
        remove_stale(&path).expect("remove what is not there");
        assert!(!path.exists());
        let missing = dir.path().join("no/such/folder/daemon.port");
        let error = write_atomically(&missing, "1\n").expect_err("no folder");
        assert!(error.to_string().starts_with(&format!("write {}.tmp: ", missing.display())), "{error}");
    }

    // Goal: port 0 is bound to a port the kernel chose, reported; the same port can be bound
    // again at once after the listener is dropped; a port in use names the address.
    #[tokio::test]
    async fn listens_and_reports_the_bound_port() {
        let (listener, bound) = listen(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).expect("listen");
        assert_ne!(bound.port(), 0);
        let error = listen(bound).expect_err("in use");
        assert!(error.to_string().starts_with(&format!("cannot listen on {bound}: ")), "{error}");
        drop(listener);
        let (_again, rebound) = listen(bound).expect("listen again");
        assert_eq!(rebound, bound);
    }
}
