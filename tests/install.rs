//! scripts/install, run for real into a temporary prefix with the binaries this test run
//! built (`--no-build --bindir-from` their folder): the files and modes it promises, a second
//! run that changes nothing, an administrator's edit that survives a reinstall, units that
//! `systemd-analyze verify` accepts, and an installed mbatchd that starts from the installed
//! configuration.

mod util;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use util::{EXIT_TIMEOUT, STARTUP_TIMEOUT};

/// What goes to sbin: the daemons and the shepherd sbatchd starts from its own folder.
const SBIN_PROGRAMS: [&str; 6] = ["lim", "mbatchd", "sbatchd", "mxfsd", "coordinator", "lava-shepherd"];
const COMMANDS: [&str; 16] = [
    "bsub", "bjobs", "bkill", "bstop", "bresume", "brequeue", "bpeek", "bhosts", "bqueues", "badmin", "lsid",
    "lsload", "lshosts", "coordctl", "mxfsctl", "lsadmin",
];
const UNITS: [&str; 5] = [
    "lavacore-lim.service",
    "lavacore-mbatchd.service",
    "lavacore-sbatchd.service",
    "lavacore-mxfsd.service",
    "lavacore-coordinator.service",
];

/// The folders of one installation inside a temporary folder.
struct Install {
    _dir: tempfile::TempDir,
    prefix: PathBuf,
    confdir: PathBuf,
    statedir: PathBuf,
    logdir: PathBuf,
    unitdir: PathBuf,
}

impl Install {
    fn new() -> Install {
        let dir = tempfile::Builder::new().prefix("lavacore-install-").tempdir().expect("tempdir");
        let top = dir.path().to_owned();
        Install {
            prefix: top.join("usr"),
            confdir: top.join("etc/lavacore"),
            statedir: top.join("var/lib/lavacore"),
            logdir: top.join("var/log/lavacore"),
            unitdir: top.join("usr/lib/systemd/system"),
            _dir: dir,
        }
    }

    /// Runs scripts/install with this installation's folders; panics with its output if it fails.
    fn run(&self) -> String {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_mbatchd")).parent().expect("a binary has a folder");
        let output = Command::new(util::repo_root().join("scripts/install"))
            .arg("--no-build")
            .arg("--bindir-from")
            .arg(bin_dir)
            .arg("--prefix")
            .arg(&self.prefix)
            .arg("--confdir")
            .arg(&self.confdir)
            .arg("--statedir")
            .arg(&self.statedir)
            .arg("--logdir")
            .arg(&self.logdir)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/install");
        let text = describe(&output);
        assert!(output.status.success(), "scripts/install failed:\n{text}");
        text
    }

    /// Every file and folder under the temporary folder: inode, mode, owner, size and mtime,
    /// so that two snapshots differ if anything was touched.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        walk(self.prefix.parent().expect("the prefix is in the temporary folder"), &mut out);
        out
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for entry in fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        let meta = fs::symlink_metadata(&path).expect("metadata");
        // A rewrite or a rename changes the inode or the mtime: no need to read contents.
        let line = format!(
            "ino={} mode={:o} uid={} size={} mtime={}.{}",
            meta.ino(),
            meta.mode(),
            meta.uid(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        if meta.is_dir() {
            walk(&path, out);
        }
        out.insert(path, line);
    }
}

/// Whether `text` holds an `@NAME@` placeholder (capitals and underscores between two `@`).
fn has_placeholder(text: &str) -> bool {
    text.split('@')
        .skip(1)
        .collect::<Vec<_>>()
        .windows(2)
        .any(|pair| !pair[0].is_empty() && pair[0].chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// A child process killed and reaped when the test ends, even by a panic.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _already_gone = self.0.kill();
        let _status = self.0.wait();
    }
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap_or_else(|error| panic!("{}: {error}", path.display())).permissions().mode()
        & 0o7777
}

// Goal: one run installs every promised file with its mode; a second run changes nothing
// and says so; an edited configuration file is never overwritten.
#[test]
fn install_is_complete_and_idempotent() {
    let install = Install::new();
    let first = install.run();
    assert!(!first.contains("nothing changed"), "the first run must install things:\n{first}");

    for program in SBIN_PROGRAMS {
        assert_eq!(mode(&install.prefix.join("sbin").join(program)), 0o755, "sbin/{program}");
    }
    for command in COMMANDS {
        assert_eq!(mode(&install.prefix.join("bin").join(command)), 0o755, "bin/{command}");
    }
    assert!(!install.prefix.join("bin/lava-bench").exists(), "lava-bench is not installed");
    assert!(!install.prefix.join("bin/lava-man").exists(), "lava-man is not installed");
    for page in lava_man::all() {
        let path = install.prefix.join(format!("share/man/man{}/{}", page.section, page.file_name()));
        assert_eq!(mode(&path), 0o644, "{}", path.display());
    }
    for file in ["lsf.conf", "lsf.shared", "lsf.cluster.lavacore", "lsbatch/lavacore/configdir/lsb.queues"] {
        assert_eq!(mode(&install.confdir.join(file)), 0o644, "{file}");
    }
    assert!(!install.confdir.join("systemd").exists(), "the units are not configuration");
    let lsf_conf = fs::read_to_string(install.confdir.join("lsf.conf")).expect("lsf.conf");
    for (key, value) in [
        ("LSB_SHAREDIR", install.statedir.clone()),
        ("LSF_LOGDIR", install.logdir.clone()),
        ("LSF_SERVERDIR", install.prefix.join("sbin")),
        ("LSF_BINDIR", install.prefix.join("bin")),
    ] {
        let line = format!("{key}={}", value.display());
        assert!(lsf_conf.lines().any(|l| l == line), "lsf.conf lacks {line}:\n{lsf_conf}");
    }
    assert_eq!(mode(&install.statedir), 0o755);
    assert_eq!(mode(&install.logdir), 0o755);
    let key = install.confdir.join("lava.cluster.key");
    assert_eq!(mode(&key), 0o600);
    lava_net::ClusterKey::load(&key).expect("the daemons accept the generated key");
    // LSF's layout, as tools find it (Snakemake's LSF executor): `badmin showconf mbd`
    // names LSF_CONFDIR and LSB_SHAREDIR, and $LSF_CONFDIR/lsbatch/<cluster>/configdir/lsb.params
    // holds DEFAULT_QUEUE.
    let out = Command::new(install.prefix.join("bin/badmin"))
        .args(["showconf", "mbd"])
        .env("LSF_ENVDIR", &install.confdir)
        .output()
        .expect("badmin showconf mbd");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", describe(&out));
    let value = |key: &str| {
        shown.lines().find_map(|line| line.trim().strip_prefix(&format!("{key} = ")).map(str::to_owned))
    };
    assert_eq!(value("LSB_SHAREDIR"), Some(install.statedir.display().to_string()), "{shown}");
    let confdir = value("LSF_CONFDIR").unwrap_or_else(|| panic!("no LSF_CONFDIR:\n{shown}"));
    let params = fs::read_to_string(Path::new(&confdir).join("lsbatch/lavacore/configdir/lsb.params"))
        .expect("$LSF_CONFDIR/lsbatch/<cluster>/configdir/lsb.params");
    assert!(params.lines().any(|line| line.starts_with("DEFAULT_QUEUE")), "{params}");
    let env = fs::read_to_string(install.confdir.join("lavacore.env")).expect("lavacore.env");
    assert!(env.lines().any(|l| l == format!("LSF_ENVDIR={}", install.confdir.display())), "{env}");
    // Owned by root when installed by root.
    if fs::metadata("/proc/self").expect("proc").uid() == 0 {
        for path in [&key, &install.statedir, &install.prefix.join("sbin/mbatchd")] {
            assert_eq!(fs::metadata(path).expect("metadata").uid(), 0, "{} is root's", path.display());
        }
    }
    for unit in UNITS {
        let text = fs::read_to_string(install.unitdir.join(unit)).expect("unit");
        assert_eq!(mode(&install.unitdir.join(unit)), 0o644, "{unit}");
        assert!(!has_placeholder(&text), "{unit} keeps a placeholder:\n{text}");
        let daemon = unit.trim_start_matches("lavacore-").trim_end_matches(".service");
        let exec = format!("ExecStart={}", install.prefix.join("sbin").join(daemon).display());
        assert!(text.lines().any(|l| l.starts_with(&exec)), "{unit} lacks {exec}:\n{text}");
    }

    let before = install.snapshot();
    let second = install.run();
    assert!(second.contains("nothing changed"), "the second run must change nothing:\n{second}");
    assert_eq!(before, install.snapshot(), "the second run touched files:\n{second}");

    // An administrator's edit and key survive a reinstall.
    let params = install.confdir.join("lsbatch/lavacore/configdir/lsb.params");
    let edited = fs::read_to_string(&params)
        .expect("lsb.params")
        .replace("MBD_SLEEP_TIME         = 1", "MBD_SLEEP_TIME = 2");
    fs::write(&params, &edited).expect("edit lsb.params");
    let key_text = fs::read_to_string(&key).expect("key");
    let third = install.run();
    assert!(third.contains("nothing changed"), "{third}");
    assert_eq!(fs::read_to_string(&params).expect("lsb.params"), edited);
    assert_eq!(fs::read_to_string(&key).expect("key"), key_text);

    // A lost unit is put back, and only it.
    fs::remove_file(install.unitdir.join(UNITS[0])).expect("remove a unit");
    let fourth = install.run();
    assert!(fourth.contains(&format!("installed {}", install.unitdir.join(UNITS[0]).display())), "{fourth}");
    assert!(fourth.contains("1 change(s) made"), "{fourth}");
}

// Goal: every installed unit passes `systemd-analyze verify` without a complaint about it
// (unknown keys and bad values are only warnings there, so its output is checked too).
#[test]
fn installed_units_verify() {
    let install = Install::new();
    install.run();
    let probe =
        Command::new("systemd-analyze").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !probe.is_ok_and(|status| status.success()) {
        eprintln!("SKIPPED: systemd-analyze is not installed (apt-get install systemd); units not verified");
        return;
    }
    for unit in UNITS {
        let path = install.unitdir.join(unit);
        let output = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .env("SYSTEMD_LOG_COLOR", "0")
            .output()
            .expect("run systemd-analyze");
        let text = describe(&output);
        assert!(output.status.success(), "systemd-analyze verify {unit}:\n{text}");
        let complaints: Vec<&str> =
            text.lines().filter(|line| line.contains(unit.trim_end_matches(".service"))).collect();
        assert!(complaints.is_empty(), "systemd-analyze verify {unit} complains:\n{text}");
    }
}

// Goal: the installed layout works: the installed mbatchd starts from the installed
// configuration and key (with only its port and port file overridden) and stops cleanly.
#[test]
fn installed_mbatchd_serves_from_the_installed_configuration() {
    let install = Install::new();
    install.run();
    let port_file = install.statedir.join("mbatchd.port");
    let log_path = install.logdir.join("mbatchd.test.log");
    let log = fs::File::create(&log_path).expect("log");
    let mut child = Reaped(
        Command::new(install.prefix.join("sbin/mbatchd"))
            .args(["--foreground", "--port", "0", "--port-file"])
            .arg(&port_file)
            .env("LSF_ENVDIR", &install.confdir)
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the installed mbatchd"),
    );
    let child = &mut child.0;
    let read_log = || fs::read_to_string(&log_path).unwrap_or_default();
    let started = util::wait_until("the installed mbatchd's port file", STARTUP_TIMEOUT, || {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(Err(status));
        }
        fs::read_to_string(&port_file).ok().and_then(|text| text.trim().parse::<u16>().ok()).map(Ok)
    });
    if let Err(status) = started {
        panic!("the installed mbatchd exited with {status}:\n{}", read_log());
    }
    // Its event log is under the installed state folder.
    let logdir = install.statedir.join("lavacore/logdir");
    assert_eq!(mode(&logdir), 0o700, "{}", read_log());
    // With its text view in LSF's place, MBD_START its first record.
    let view = util::wait_until("the lsb.events text view", STARTUP_TIMEOUT, || {
        fs::read_to_string(logdir.join("lsb.events")).ok().filter(|text| text.contains("\"MBD_START\""))
    });
    assert!(view.starts_with('#'), "{view}");
    let _status = Command::new("kill").args(["-s", "TERM", &child.id().to_string()]).status();
    let status = util::wait_until("the installed mbatchd to stop", EXIT_TIMEOUT, || {
        child.try_wait().expect("try_wait")
    });
    assert!(status.success(), "mbatchd exited with {status}:\n{}", read_log());
}

// Goal: scripts/package-deb makes a Debian package holding the daemons, the commands, their
// man pages, the units and the configuration as conffiles, with a postinst that makes the key, and no key.
#[test]
fn debian_package_builds() {
    let probe =
        Command::new("dpkg-deb").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !probe.is_ok_and(|status| status.success()) {
        eprintln!("SKIPPED: dpkg-deb is not installed; no Debian package built");
        return;
    }
    let out = tempfile::Builder::new().prefix("lavacore-deb-").tempdir().expect("tempdir");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mbatchd")).parent().expect("a binary has a folder");
    let output = Command::new(util::repo_root().join("scripts/package-deb"))
        .args(["--no-build", "--compress", "none", "--out"])
        .arg(out.path())
        .arg("--bindir-from")
        .arg(bin_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/package-deb");
    let text = describe(&output);
    assert!(output.status.success(), "scripts/package-deb failed:\n{text}");
    let deb = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    assert!(deb.starts_with(out.path()) && deb.extension().is_some_and(|e| e == "deb"), "{text}");

    let dpkg = |args: &[&str]| {
        let output = Command::new("dpkg-deb").args(args).arg(&deb).output().expect("run dpkg-deb");
        assert!(output.status.success(), "dpkg-deb {args:?}:\n{}", describe(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let contents = dpkg(&["--contents"]);
    let mut expected: Vec<String> = SBIN_PROGRAMS.iter().map(|d| format!("./usr/sbin/{d}")).collect();
    expected.extend(COMMANDS.iter().map(|c| format!("./usr/bin/{c}")));
    expected.extend(UNITS.iter().map(|u| format!("./usr/lib/systemd/system/{u}")));
    expected.extend(["./etc/lavacore/lsf.conf".to_owned(), "./etc/lavacore/lavacore.env".to_owned()]);
    expected.extend(["./usr/share/man/man1/bsub.1".to_owned(), "./usr/share/man/man8/mbatchd.8".to_owned()]);
    for path in &expected {
        assert!(contents.lines().any(|line| line.ends_with(path.as_str())), "{path} missing:\n{contents}");
    }
    assert!(!contents.contains("lava.cluster.key"), "a package must not carry a cluster key:\n{contents}");
    assert!(!contents.contains("/systemd/lavacore-"), "units are not configuration:\n{contents}");
    let field = Command::new("dpkg-deb").arg("--field").arg(&deb).arg("Package").output().expect("dpkg-deb");
    assert_eq!(String::from_utf8_lossy(&field.stdout).trim(), "lavacore", "{}", describe(&field));
    let conffiles = dpkg(&["--info"]);
    assert!(conffiles.contains("conffiles") && conffiles.contains("postinst"), "{conffiles}");
    let unpacked = out.path().join("control");
    let status =
        Command::new("dpkg-deb").arg("--control").arg(&deb).arg(&unpacked).status().expect("dpkg-deb");
    assert!(status.success());
    let listed = fs::read_to_string(unpacked.join("conffiles")).expect("conffiles");
    assert!(listed.lines().any(|l| l == "/etc/lavacore/lsf.conf"), "{listed}");
    let postinst = fs::read_to_string(unpacked.join("postinst")).expect("postinst");
    assert!(postinst.contains("lava.cluster.key") && postinst.contains("chmod 600"), "{postinst}");
}
