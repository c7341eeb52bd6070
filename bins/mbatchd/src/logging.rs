//! Where mbatchd's log goes: standard error (the default, for `--foreground`
//! under a supervisor or a terminal), or a file (`--log-file`, which a
//! detached mbatchd uses) that SIGHUP reopens, so that logrotate can move it
//! away. Without `--log-file`, when standard error is the journal (mbatchd
//! runs under systemd), entries go to the journal's native protocol instead
//! (`lava_sd::journald`), keeping their level and fields. The level is
//! `RUST_LOG` if set, else `LSF_LOG_MASK`'s.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use lava_conf::LogMask;
use lava_shell::startup::PathError;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::ShellError;

/// The tracing level of an `LSF_LOG_MASK`.
pub fn level(mask: LogMask) -> &'static str {
    mask.level_name()
}

/// Installs the logger: to `file` (appending) if given, else to the journal
/// if standard error is connected to it, else to standard error. Returns the
/// file's handle, for [`LogFile::reopen`].
pub fn init(mask: LogMask, file: Option<&Path>) -> Result<Option<LogFile>, ShellError> {
    if file.is_none() && lava_sd::journald::try_init(level(mask)) {
        return Ok(None);
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level(mask)));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    // try_init fails only if a logger is already installed (a test); that one stays.
    match file {
        Some(path) => {
            let log_file = LogFile::open(path)?;
            let _installed = builder.with_ansi(false).with_writer(log_file.clone()).try_init();
            Ok(Some(log_file))
        }
        None => {
            let _installed = builder.with_ansi(io::stderr().is_terminal()).with_writer(io::stderr).try_init();
            Ok(None)
        }
    }
}

/// A log file that can be reopened under the same name.
#[derive(Clone, Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl LogFile {
    fn open(path: &Path) -> Result<LogFile, ShellError> {
        let file = open_append(path)?;
        Ok(LogFile { path: path.to_owned(), file: Arc::new(Mutex::new(file)) })
    }

    /// Opens the path again (creating it) and writes there from now on.
    pub fn reopen(&self) -> Result<(), ShellError> {
        let file = open_append(&self.path)?;
        *self.file.lock().unwrap_or_else(PoisonError::into_inner) = file;
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_append(path: &Path) -> Result<File, ShellError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| PathError::new("open the log file", path, source).into())
}

/// One write of the formatter (a whole event), under the file's lock.
#[derive(Debug)]
pub struct LogFileWriter {
    file: Arc<Mutex<File>>,
}

impl Write for LogFileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).flush()
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = LogFileWriter;

    fn make_writer(&'a self) -> LogFileWriter {
        LogFileWriter { file: Arc::clone(&self.file) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: after the file is moved away (logrotate), reopen writes to a new
    // file under the old name, and the moved file keeps what was written.
    #[test]
    fn reopen_follows_the_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mbatchd.log");
        let log = LogFile::open(&path).expect("opens");
        log.make_writer().write_all(b"one\n").expect("writes");
        std::fs::rename(&path, dir.path().join("mbatchd.log.1")).expect("rotate");
        log.reopen().expect("reopens");
        log.make_writer().write_all(b"two\n").expect("writes");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("mbatchd.log.1")).expect("read"), "one\n");
    }
}
