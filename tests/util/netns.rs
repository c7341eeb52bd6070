//! Network namespaces for the multi-host tests: one namespace per simulated host, each with
//! a veth pair (`eth0` inside, `pN` outside) plugged into a bridge that lives in a namespace
//! of its own, so nothing is created in the machine's own network stack. Host `i` has the
//! address `SUBNET.(i+1)/24`. Namespace names carry the test's pid (`PREFIX<pid>-<role>`)
//! so parallel runs do not clash; [`Netns`] deletes them (and with them every veth and the
//! bridge) when dropped, and [`Netns::create`] first deletes those left by a killed run.
//!
//! Creating namespaces needs root and a sandbox that allows it: [`Netns::create`] returns
//! the reason as an error, which the caller prints as `skipped: REASON`.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `ip ARGS`; the error names the command and carries what `ip` said.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("ip {}: {error}", args.join(" ")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// `ip netns exec NS PROGRAM` with `LSF_ENVDIR=envdir` and no standard input (`ip` execs
/// the program, so the child's pid is the program's): a command on a simulated host.
pub fn exec_in(ns: &str, envdir: &Path, program: &Path) -> Command {
    let mut command = Command::new("ip");
    command.env("LSF_ENVDIR", envdir).stdin(Stdio::null()).args(["netns", "exec", ns]).arg(program);
    command
}

/// The namespaces of one test; see the module doc. Dropping it deletes them.
pub struct Netns {
    created: Vec<String>,
    /// `hosts[i]`: the namespace of host `i`.
    pub hosts: Vec<String>,
    /// The namespace holding the bridge `br0` and the host ends `p0`, `p1`, ...
    pub bridge: String,
    subnet: String,
}

impl Netns {
    /// Creates a bridge namespace and one namespace per host (`hosts.len()` of them) on
    /// `subnet` (three octets, e.g. `10.78.0`), with `prefix` starting every name.
    pub fn create(prefix: &str, hosts: &[&str], subnet: &str) -> Result<Netns, String> {
        remove_stale(prefix);
        let pid = std::process::id();
        let bridge = format!("{prefix}{pid}-br");
        let names: Vec<String> = hosts.iter().map(|h| format!("{prefix}{pid}-{h}")).collect();
        let mut netns = Netns {
            created: Vec::new(),
            hosts: names.clone(),
            bridge: bridge.clone(),
            subnet: subnet.to_owned(),
        };
        for name in std::iter::once(&bridge).chain(&names) {
            ip(&["netns", "add", name])?;
            netns.created.push(name.clone());
        }
        ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
        for (idx, ns) in names.iter().enumerate() {
            let port = format!("p{idx}");
            ip(&["-n", &bridge, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", ns])?;
            ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &bridge, "link", "set", &port, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{}/24", netns.addr(idx)), "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        }
        Ok(netns)
    }

    /// Host `idx`'s address.
    pub fn addr(&self, idx: usize) -> String {
        format!("{}.{}", self.subnet, idx + 1)
    }

    /// Unplugs (`up == false`) or plugs back host `idx`'s cable: sets the bridge end of its
    /// veth pair down or up. The host keeps its address and its sockets; while unplugged
    /// nothing it sends arrives and nothing reaches it.
    pub fn set_cable(&self, idx: usize, up: bool) -> Result<(), String> {
        ip(&["-n", &self.bridge, "link", "set", &format!("p{idx}"), if up { "up" } else { "down" }])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            if let Err(error) = ip(&["netns", "del", name]) {
                eprintln!("cleanup: {error}");
            }
        }
    }
}

/// Deletes the namespaces starting with `prefix` left by an earlier run that was killed (the
/// pid in their name is gone).
fn remove_stale(prefix: &str) {
    let Ok(output) = Command::new("ip").args(["netns", "list"]).stdin(Stdio::null()).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        let Some(pid) = name.strip_prefix(prefix).and_then(|rest| rest.split('-').next()) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _best_effort = ip(&["netns", "del", name]);
        }
    }
}
