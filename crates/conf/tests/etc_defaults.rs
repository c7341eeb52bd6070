//! The default configuration in the repository's `etc/` loads through `ClusterConfig::load`
//! and says what its comments say; and it can be turned into a several-host loopback cluster
//! the way `scripts/cluster` will, by rewriting a few lines.

use std::path::{Path, PathBuf};

use lava_conf::{ClusterConfig, Interactive, LogMask, Members, Mxj, QueueLimit};

fn etc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../etc")
}

/// Copies `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's folder");
    for entry in std::fs::read_dir(from).expect("read etc/") {
        let entry = entry.expect("a folder entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

#[test]
fn etc_loads_as_a_one_host_cluster() {
    // Goal: etc/ is a complete, valid one-host cluster with the documented values.
    // Method: load it from the repository and check each file's main settings.
    let etc = etc_dir();
    let config = ClusterConfig::load(&etc).expect("etc/ is a valid configuration");

    assert_eq!(config.cluster_name, "lavacore");
    assert_eq!(config.lsf.confdir, etc);
    assert_eq!(config.lsb_configdir(), etc.join("lsbatch/lavacore/configdir"));
    assert_eq!(config.work_dir(), PathBuf::from("/var/lib/lavacore/lavacore"));
    assert_eq!(config.lsf.log_mask, LogMask::Warning);
    assert_eq!(
        (config.lsf.lim_port, config.lsf.lim_tcp_port, config.lsf.mbd_port, config.lsf.sbd_port),
        (6879, 6879, 6881, 6882)
    );
    assert_eq!((config.lsf.mxfsd_port, config.lsf.coord_port), (6883, 6884));
    assert_eq!(config.lsf.cluster_key_file, etc.join("lava.cluster.key"));
    assert_eq!(config.lsf.cmd_socket, PathBuf::from("/run/lavacore/lava.sock"));

    assert_eq!(config.shared.clusters, ["lavacore"]);
    assert_eq!(config.cluster.admins, ["root"]);
    let master = config.master_host().expect("a master host");
    assert_eq!(master.name, "localhost");
    assert_eq!(master.resources, ["cs", "linux"]);
    assert_eq!((master.addr, master.lim_port, master.sbd_port), (None, None, None));
    assert_eq!(config.cluster.hosts.len(), 1);

    let names: Vec<&str> = config.queues.queues.iter().map(|queue| queue.name.as_str()).collect();
    assert_eq!(names, ["normal", "priority", "short"]);
    assert_eq!(config.default_queues, ["normal"]);
    let normal = config.default_queue().expect("a default queue");
    assert_eq!((normal.name.as_str(), normal.priority), ("normal", 30));
    assert_eq!((normal.hosts.clone(), normal.users.clone()), (Members::All, Members::All));
    assert_eq!(normal.interactive, Interactive::Yes);
    assert_eq!(config.queue("priority").map(|queue| queue.priority), Some(43));
    let short = config.queue("short").expect("a short queue");
    assert_eq!(short.run_limit_s, Some(QueueLimit { default: None, max: 3600 }));

    assert_eq!(config.params.mbd_sleep_time_s, 1);
    assert_eq!(config.params.job_terminate_interval_s, 10);
    assert_eq!((config.params.clean_period_s, config.params.max_jobid), (3600, 999_999));
    assert_eq!(config.params.max_job_array_size, 1000);
    assert_eq!(config.hosts.default.as_ref().map(|host| host.mxj), Some(Mxj::Cpus));
    assert_eq!(config.users.default.as_ref().map(|user| user.max_jobs), Some(None));
    assert_eq!(config.unimplemented_warnings(), Vec::<String>::new());
}

#[test]
fn etc_rewritten_for_three_logical_hosts_on_loopback() {
    // Goal: the substitution scripts/cluster will do (host row, ports, state folder) gives a
    // valid several-host cluster on 127.0.0.1 whose hosts each have their own ports.
    // Method: copy etc/ to a temporary folder, replace the `localhost` row with three rows
    // and rewrite the port and state lines of lsf.conf, then load and check.
    let dir = tempfile::tempdir().expect("a temporary folder");
    copy_tree(&etc_dir(), dir.path());

    let cluster_path = dir.path().join("lsf.cluster.lavacore");
    let cluster_text = std::fs::read_to_string(&cluster_path).expect("read lsf.cluster");
    let rows = "node1 ! ! 1 (cs linux) 127.0.0.1 17001 17002 17003\n\
                node2 ! ! 1 (cs linux) 127.0.0.1 17011 17012 17013\n\
                node3 ! ! 1 (cs linux) 127.0.0.1 17021 17022 17023\n";
    let cluster_text = cluster_text.replace(
        "localhost  !      !     1       (cs linux)  -          -              -              -\n",
        rows,
    );
    assert!(cluster_text.contains("node3"), "the localhost row was found and replaced");
    std::fs::write(&cluster_path, cluster_text).expect("write lsf.cluster");

    let conf_path = dir.path().join("lsf.conf");
    let work = dir.path().join("work");
    let conf_text: String = std::fs::read_to_string(&conf_path)
        .expect("read lsf.conf")
        .lines()
        .map(|line| match line.split_once('=').map(|(key, _)| key) {
            Some("LSB_MBD_PORT") => "LSB_MBD_PORT=17100".to_string(),
            Some("LAVA_COORD_PORT") => "LAVA_COORD_PORT=17101".to_string(),
            Some("LSB_SHAREDIR") => format!("LSB_SHAREDIR={}", work.display()),
            Some("LAVA_CMD_SOCKET") => "LAVA_CMD_SOCKET=run/lava.sock".to_string(),
            _ => line.to_string(),
        })
        .map(|line| line + "\n")
        .collect();
    std::fs::write(&conf_path, conf_text).expect("write lsf.conf");

    let config = ClusterConfig::load(dir.path()).expect("the rewritten copy is valid");
    let names: Vec<&str> = config.cluster.master_candidates().map(|host| host.name.as_str()).collect();
    assert_eq!(names, ["node1", "node2", "node3"]);
    let node2 = config.cluster.host("node2").expect("node2 is a host");
    assert_eq!(node2.addr, Some(std::net::IpAddr::from([127, 0, 0, 1])));
    assert_eq!(
        (node2.lim_udp_port(&config.lsf), node2.sbd_tcp_port(&config.lsf), node2.mxfsd_tcp_port(&config.lsf)),
        (17011, 17012, 17013)
    );
    assert_eq!(config.lsf.mbd_port, 17100);
    assert_eq!(config.work_dir(), work.join("lavacore"));
    assert_eq!(config.lsf.cmd_socket, dir.path().join("run/lava.sock"));
}
