//! A small tmpfs for the full-disk tests (docs/operations.md, "A full disk"): mounted on a
//! folder of the test's cluster, filled on demand, unmounted when dropped. Mounting needs
//! root (CI runs as root); elsewhere `mount` says why, and the test skips.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A tmpfs of some size mounted on `path`, unmounted (lazily) when dropped.
pub struct SmallFs {
    path: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (`16m`) on `path`, which must exist.
    pub fn mount(path: &Path, size: &str) -> Result<SmallFs, String> {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|error| format!("mount: {error}"))?;
        if !output.status.success() {
            return Err(format!("mount -t tmpfs: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        Ok(SmallFs { path: path.to_owned() })
    }

    /// [`SmallFs::mount`], or `None` after saying why the calling test is skipped (a test
    /// runs on a thread named after it).
    pub fn mount_or_skip(path: &Path, size: &str) -> Option<SmallFs> {
        match SmallFs::mount(path, size) {
            Ok(fs) => Some(fs),
            Err(reason) => {
                eprintln!("{}: skipped: {reason}", std::thread::current().name().unwrap_or("this test"));
                None
            }
        }
    }

    /// Free bytes, as `stat -f` reports them.
    pub fn available(&self) -> u64 {
        let out = Command::new("stat").args(["-f", "-c", "%a %S"]).arg(&self.path).output().expect("stat -f");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut numbers = said.split_whitespace().map(|n| n.parse::<u64>().expect("a number"));
        numbers.next().expect("blocks") * numbers.next().expect("block size")
    }

    /// Writes zeros into the file `name` until the file system refuses more, and goes on
    /// taking whatever is freed (a daemon pruning its own files) until [`Filler::free`].
    pub fn keep_full(&self, name: &str) -> Filler {
        let path = self.path.join(name);
        let mut file = std::fs::File::create(&path).expect("create the filler");
        let block = vec![0u8; 4096];
        while file.write_all(&block).is_ok() {}
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                if file.write_all(&block).is_err() {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        });
        Filler { path, stop, thread: Some(thread) }
    }
}

/// The file keeping a [`SmallFs`] full.
pub struct Filler {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Filler {
    /// Stops filling and deletes the file: the space returns.
    pub fn free(mut self) {
        self.stop_filling();
        std::fs::remove_file(&self.path).expect("delete the filler");
    }

    fn stop_filling(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop_filling();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
