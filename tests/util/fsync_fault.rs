//! A failing or slow disk for the real daemons (docs/operations.md, "A failed fsync"): a
//! small `LD_PRELOAD` library, built here with `cc` (the C compiler every Rust toolchain
//! links with), whose `fdatasync` and `fsync` act on the file `<trigger>.<pid>` of the
//! calling process while it exists: empty, they fail with EIO; holding `slow MS`, they take
//! MS milliseconds longer and then flush. Without the file they are the C library's.
//! Without `cc` the test says why it is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Cluster;

const SOURCE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* 1: fail with EIO; 0: flush, after sleeping while the trigger says `slow MS`. */
static int failing(void) {
    const char *trigger = getenv("LAVA_TEST_FAIL_FSYNC_WHILE");
    char path[4096], text[64] = {0};
    long ms;
    FILE *file;
    if (trigger == NULL) return 0;
    snprintf(path, sizeof path, "%s.%ld", trigger, (long)getpid());
    file = fopen(path, "r");
    if (file == NULL) return 0;
    fread(text, 1, sizeof text - 1, file);
    fclose(file);
    if (sscanf(text, "slow %ld", &ms) == 1) {
        usleep((useconds_t)ms * 1000);
        return 0;
    }
    return 1;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (failing()) { errno = EIO; return -1; }
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (failing()) { errno = EIO; return -1; }
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}
"#;

/// The fault, loaded into every daemon spawned as `daemon` from now on.
pub struct FsyncFault {
    trigger: PathBuf,
}

impl FsyncFault {
    /// Builds the library in the cluster's folder and loads it into `daemon`'s later
    /// spawns; `None` (after saying why the calling test is skipped) without a C compiler.
    pub fn install(cluster: &mut Cluster, daemon: &str) -> Option<FsyncFault> {
        let source = cluster.dir().join("fail_fsync.c");
        let library = cluster.dir().join("fail_fsync.so");
        std::fs::write(&source, SOURCE).expect("write the fault library's source");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&library)
            .arg(&source)
            .arg("-ldl")
            .output();
        match built {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!("cc failed on the fault library: {}", String::from_utf8_lossy(&out.stderr)),
            Err(error) => {
                let test = std::thread::current().name().unwrap_or("this test").to_owned();
                eprintln!("{test}: skipped: cc: {error}");
                return None;
            }
        }
        let trigger = cluster.dir().join("fail-fsync");
        cluster.set_daemon_env(daemon, "LD_PRELOAD", &library);
        cluster.set_daemon_env(daemon, "LAVA_TEST_FAIL_FSYNC_WHILE", &trigger);
        Some(FsyncFault { trigger })
    }

    /// From now on every flush of process `pid` fails with EIO.
    pub fn fail(&self, pid: u32) {
        std::fs::write(self.path(pid), b"").expect("create the trigger");
    }

    /// From now on every flush of process `pid` takes `delay` longer, then flushes.
    pub fn slow(&self, pid: u32, delay: std::time::Duration) {
        std::fs::write(self.path(pid), format!("slow {}", delay.as_millis())).expect("create the trigger");
    }

    /// Flushes of process `pid` succeed again, at their own speed.
    pub fn heal(&self, pid: u32) {
        let _gone = std::fs::remove_file(self.path(pid));
    }

    fn path(&self, pid: u32) -> PathBuf {
        let mut path = self.trigger.clone().into_os_string();
        path.push(format!(".{pid}"));
        Path::new(&path).to_owned()
    }
}
