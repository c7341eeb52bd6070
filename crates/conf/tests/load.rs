//! `ClusterConfig::load` on small clusters written to temporary folders: which files are
//! required, how the cluster name and the default queues are found, and the checks that span
//! files. Each test starts from one valid two-host cluster and changes one file.

use std::path::Path;

use lava_conf::{ClusterConfig, ConfError};

const LSB_DIR: &str = "lsbatch/c1/configdir";

/// lsf.shared without its Cluster section, which some tests vary.
const SHARED_REST: &str = "Begin HostType\nTYPENAME\nlinux\nEnd HostType\n\
                           Begin HostModel\nMODELNAME CPUFACTOR\nm1 1\nEnd HostModel\n\
                           Begin Resource\nRESOURCENAME\ncs\nEnd Resource\n";

/// Writes a valid two-host cluster `c1` into a new temporary folder, then applies `changes`:
/// `(path, Some(text))` writes a file, `(path, None)` removes it.
fn cluster(changes: &[(&str, Option<&str>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let files = [
        ("lsf.conf", "LSB_SHAREDIR=work\n"),
        ("lsf.shared", &format!("Begin Cluster\nClusterName\nc1\nEnd Cluster\n{SHARED_REST}")),
        (
            "lsf.cluster.c1",
            "Begin Host\nHOSTNAME model type server RESOURCES\nh1 m1 linux 1 (cs)\nh2 ! ! 1 ()\nEnd Host\n",
        ),
        ("lsbatch/c1/configdir/lsb.queues", "Begin Queue\nQUEUE_NAME = normal\nEnd Queue\n"),
    ];
    for (path, text) in &files {
        write(dir.path(), path, Some(text));
    }
    for (path, text) in changes {
        write(dir.path(), path, *text);
    }
    dir
}

fn write(root: &Path, path: &str, text: Option<&str>) {
    let path = root.join(path);
    match text {
        Some(text) => {
            std::fs::create_dir_all(path.parent().expect("a file has a folder")).expect("create the folder");
            std::fs::write(&path, text).expect("write the file");
        }
        None => std::fs::remove_file(&path).expect("remove the file"),
    }
}

fn load(changes: &[(&str, Option<&str>)]) -> (tempfile::TempDir, Result<ClusterConfig, ConfError>) {
    let dir = cluster(changes);
    let result = ClusterConfig::load(dir.path());
    (dir, result)
}

/// The error message of loading with `changes`, with the temporary folder's path removed.
fn error(changes: &[(&str, Option<&str>)]) -> String {
    let (dir, result) = load(changes);
    let message = result.expect_err("the configuration is invalid").to_string();
    message.replace(&format!("{}/", dir.path().display()), "")
}

fn lsb(file: &str) -> String {
    format!("{LSB_DIR}/{file}")
}

#[test]
fn minimal_cluster_loads_with_optional_files_absent() {
    // Goal: lsb.params, lsb.hosts and lsb.users are optional and default when absent, and
    // relative paths in lsf.conf follow the envdir.
    // Method: load the base cluster, which has none of the three.
    let (dir, result) = load(&[]);
    let config = result.expect("valid");
    assert_eq!(config.cluster_name, "c1");
    assert_eq!(config.master_host().map(|host| host.name.as_str()), Some("h1"));
    assert_eq!(config.params.mbd_sleep_time_s, 60);
    assert_eq!(
        (config.params.path.clone(), config.hosts.path.clone(), config.users.path.clone()),
        (None, None, None)
    );
    assert!(config.hosts.hosts.is_empty() && config.users.users.is_empty());
    assert_eq!(config.default_queues, Vec::<String>::new());
    assert!(config.default_queue().is_none());
    assert_eq!(config.work_dir(), dir.path().join("work/c1"));
}

#[test]
fn default_queue_resolution() {
    // Goal: DEFAULT_QUEUE wins, else queues marked DEFAULT = y, else a queue named `default`;
    // a DEFAULT_QUEUE naming no queue, or disagreeing with a DEFAULT mark, is an error.
    // Method: four variants of lsb.queues and lsb.params.
    let two = "Begin Queue\nQUEUE_NAME = normal\nEnd Queue\nBegin Queue\nQUEUE_NAME = short\nDEFAULT = y\nEnd Queue\n";
    let queues = lsb("lsb.queues");
    let params = lsb("lsb.params");

    let (_dir, result) = load(&[(&queues, Some(two))]);
    assert_eq!(result.expect("valid").default_queues, ["short"]);

    let named_default = "Begin Queue\nQUEUE_NAME = default\nEnd Queue\n";
    let (_dir, result) = load(&[(&queues, Some(named_default))]);
    assert_eq!(result.expect("valid").default_queue().map(|queue| queue.name.as_str()), Some("default"));

    let both = "Begin Parameters\nDEFAULT_QUEUE = short normal\nEnd Parameters\n";
    let (_dir, result) = load(&[(&queues, Some(two)), (&params, Some(both))]);
    assert_eq!(result.expect("valid").default_queues, ["short", "normal"]);

    assert_eq!(
        error(&[(&params, Some("Begin Parameters\n\nDEFAULT_QUEUE = nosuch\nEnd Parameters\n"))]),
        format!("{LSB_DIR}/lsb.params:3: `DEFAULT_QUEUE`: `nosuch` is not a queue of {LSB_DIR}/lsb.queues")
    );
    assert_eq!(
        error(&[
            (&queues, Some(two)),
            (&params, Some("Begin Parameters\nDEFAULT_QUEUE = normal\nEnd Parameters\n"))
        ]),
        format!(
            "{LSB_DIR}/lsb.queues:6: queue `short` is marked `DEFAULT = y` but `DEFAULT_QUEUE` in \
             {LSB_DIR}/lsb.params does not list it"
        )
    );
}

#[test]
fn cluster_name_comes_from_lsf_shared_or_lava_cluster_name() {
    // Goal: LAVA_CLUSTER_NAME picks the cluster and must be one lsf.shared lists; without it
    // lsf.shared must list exactly one cluster.
    // Method: variants of lsf.conf and lsf.shared's Cluster section.
    let two_clusters = format!("Begin Cluster\nClusterName\nc0\nc1\nEnd Cluster\n{SHARED_REST}");
    let two_clusters = two_clusters.as_str();
    assert_eq!(
        error(&[("lsf.shared", Some(two_clusters))]),
        "lsf.shared: the `Cluster` section lists 2 clusters; set `LAVA_CLUSTER_NAME` in lsf.conf to say which one this is"
    );
    let (_dir, result) =
        load(&[("lsf.shared", Some(two_clusters)), ("lsf.conf", Some("LAVA_CLUSTER_NAME=c1\n"))]);
    assert_eq!(result.expect("valid").cluster_name, "c1");
    assert_eq!(
        error(&[("lsf.conf", Some("# c\nLAVA_CLUSTER_NAME=c9\n"))]),
        "lsf.conf:2: `LAVA_CLUSTER_NAME`: `c9` is not a cluster of lsf.shared's `Cluster` section"
    );
    assert_eq!(
        error(&[("lsf.shared", Some(SHARED_REST))]),
        "lsf.shared: no cluster name: the file has no `Cluster` section listing one, and lsf.conf sets no \
         `LAVA_CLUSTER_NAME`"
    );
}

#[test]
fn missing_required_files_are_named() {
    // Goal: each required file, when missing, is named in the error with a useful hint.
    // Method: remove lsf.shared, lsf.cluster.c1 and lsb.queues in turn; for the last, leave a
    // LavaLite 0.1-style lsb.queues in LSF_CONFDIR.
    assert_eq!(error(&[("lsf.shared", None)]), "lsf.shared: the lsf.shared file does not exist");
    assert_eq!(
        error(&[("lsf.cluster.c1", None)]),
        "lsf.cluster.c1: the lsf.cluster file of this cluster does not exist; lsf.shared names the cluster `c1`"
    );
    assert_eq!(
        error(&[(&lsb("lsb.queues"), None)]),
        format!("{LSB_DIR}/lsb.queues: the lsb.queues file does not exist")
    );
    let (dir, result) =
        load(&[(&lsb("lsb.queues"), None), ("lsb.queues", Some("Begin Queue\nQUEUE_NAME = q\nEnd Queue\n"))]);
    let message = result.expect_err("lsb.queues is in the wrong place").to_string();
    let root = dir.path().display();
    assert_eq!(
        message,
        format!(
            "{root}/{LSB_DIR}/lsb.queues: the lsb.queues file does not exist; found {root}/lsb.queues instead \
             (LavaLite 0.1's layout): move the lsb.* files to {root}/{LSB_DIR}"
        )
    );
}

#[test]
fn hosts_must_use_what_lsf_shared_defines() {
    // Goal: a host's model, type and resources must be defined in lsf.shared.
    // Method: one lsf.cluster per kind of undefined name.
    let host = |row: &str| format!("Begin Host\nHOSTNAME model type RESOURCES\n{row}\nEnd Host\n");
    assert_eq!(
        error(&[("lsf.cluster.c1", Some(&host("h1 m9 ! ()")))]),
        "lsf.cluster.c1:3: `model`: `m9` is not a model of lsf.shared's `HostModel` section"
    );
    assert_eq!(
        error(&[("lsf.cluster.c1", Some(&host("h1 ! solaris ()")))]),
        "lsf.cluster.c1:3: `type`: `solaris` is not a type of lsf.shared's `HostType` section"
    );
    assert_eq!(
        error(&[("lsf.cluster.c1", Some(&host("h1 - - (cs gpu)")))]),
        "lsf.cluster.c1:3: `RESOURCES`: `gpu` is not a resource of lsf.shared's `Resource` section"
    );
}

#[test]
fn ports_of_logical_hosts_must_not_clash() {
    // Goal: hosts sharing a LAVA_ADDR must have distinct ports, and a host's own port must
    // not be another daemon's; hosts on distinct addresses may reuse numbers.
    // Method: three lsf.cluster variants.
    let hosts =
        |rows: &str| format!("Begin Host\nHOSTNAME LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT\n{rows}End Host\n");
    assert_eq!(
        error(&[("lsf.cluster.c1", Some(&hosts("h1 127.0.0.1 7001 7002\nh2 127.0.0.1 7011 7002\n")))]),
        "lsf.cluster.c1:4: hosts `h1` and `h2` share address 127.0.0.1 and TCP port 7002 (this host's sbatchd); \
         give each logical host its own LAVA_LIM_PORT, LAVA_SBD_PORT and LAVA_MXFSD_PORT"
    );
    assert_eq!(
        error(&[("lsf.cluster.c1", Some(&hosts("h1 127.0.0.1 7001 6881\n")))]),
        "lsf.cluster.c1:3: host `h1` would run its sbatchd and its mbatchd on the same TCP port 6881"
    );
    let (_dir, result) =
        load(&[("lsf.cluster.c1", Some(&hosts("h1 127.0.0.1 7001 7002\nh2 127.0.0.2 7001 7002\n")))]);
    assert_eq!(result.expect("distinct addresses").cluster.hosts.len(), 2);
}

#[test]
fn lsb_files_must_name_real_hosts() {
    // Goal: lsb.hosts rows and groups, and queue HOSTS, must name lsf.cluster hosts or host
    // groups; a group may not take a host's name; groups may use earlier groups.
    // Method: variants of lsb.hosts and lsb.queues.
    let hosts_file = lsb("lsb.hosts");
    let groups = |rows: &str| format!("Begin HostGroup\nGROUP_NAME GROUP_MEMBER\n{rows}End HostGroup\n");
    assert_eq!(
        error(&[(&hosts_file, Some("Begin Host\nHOST_NAME MXJ\nh9 1\nEnd Host\n"))]),
        format!(
            "{LSB_DIR}/lsb.hosts:3: `HOST_NAME`: `h9` is not a host of lsf.cluster.c1, a host group, or `default`"
        )
    );
    assert_eq!(
        error(&[(&hosts_file, Some(&groups("h1 (h2)\n")))]),
        format!("{LSB_DIR}/lsb.hosts:3: host group `h1` has the name of a host of lsf.cluster.c1")
    );
    assert_eq!(
        error(&[(&hosts_file, Some(&groups("g2 (g1)\ng1 (h1)\n")))]),
        format!(
            "{LSB_DIR}/lsb.hosts:3: `GROUP_MEMBER`: `g1` is not a host of lsf.cluster.c1, a host group defined \
             above, or `all`"
        )
    );
    let queues = lsb("lsb.queues");
    assert_eq!(
        error(&[(&queues, Some("Begin Queue\nQUEUE_NAME = q\nHOSTS = h1 h7+1\nEnd Queue\n"))]),
        format!(
            "{LSB_DIR}/lsb.queues:3: `HOSTS`: `h7` is not a host of lsf.cluster.c1 or a host group of lsb.hosts"
        )
    );
    let (_dir, result) = load(&[
        (&hosts_file, Some(&groups("g1 (h1)\ng2 (g1 h2)\nevery all\n"))),
        (&queues, Some("Begin Queue\nQUEUE_NAME = q\nHOSTS = g2 h1+2\nEnd Queue\n")),
    ]);
    let config = result.expect("valid");
    assert_eq!(
        config.queue("q").map(|queue| queue.hosts.clone()),
        Some(lava_conf::Members::Named(vec!["g2".into(), "h1".into()]))
    );
}

#[test]
fn unimplemented_lsf_settings_become_warnings() {
    // Goal: LSF settings LavaCore accepts but ignores are listed, each with file and line,
    // for the daemon to log.
    // Method: one unimplemented key, column and section in three files; a loadStop
    // threshold of lsb.hosts (its loadSched is applied) and a user's JL/P in lsb.users.
    let (dir, result) = load(&[
        (&lsb("lsb.queues"), Some("Begin Queue\nQUEUE_NAME = q\nRUN_WINDOW = 8:00-18:00\nEnd Queue\n")),
        (&lsb("lsb.params"), Some("Begin Parameters\nMAX_SBD_FAIL = 3\nEnd Parameters\n")),
        (&lsb("lsb.hosts"), Some("Begin Host\nHOST_NAME MXJ r1m ut\nh1 2 0.5/2.0 0.9/\nEnd Host\n")),
        (&lsb("lsb.users"), Some("Begin User\nUSER_NAME MAX_JOBS JL/P\nalice 4 1\nEnd User\n")),
        (
            "lsf.cluster.c1",
            Some(
                "Begin Host\nHOSTNAME REXPRI\nh1 0\nEnd Host\nBegin ResourceMap\nRESOURCENAME LOCATION\nEnd ResourceMap\n",
            ),
        ),
    ]);
    let warnings: Vec<String> = result
        .expect("valid")
        .unimplemented_warnings()
        .into_iter()
        .map(|warning| warning.replace(&format!("{}/", dir.path().display()), ""))
        .collect();
    assert_eq!(
        warnings,
        [
            "lsf.cluster.c1: section `ResourceMap` has no effect in LavaCore".to_string(),
            "lsf.cluster.c1:3: column `REXPRI` of host `h1` has no effect in LavaCore".to_string(),
            format!("{LSB_DIR}/lsb.queues:3: key `RUN_WINDOW` of queue `q` has no effect in LavaCore"),
            format!("{LSB_DIR}/lsb.params:2: key `MAX_SBD_FAIL` has no effect in LavaCore"),
            format!(
                "{LSB_DIR}/lsb.hosts:3: the stop threshold (loadStop) of column `r1m` of host `h1` has no \
                 effect in LavaCore"
            ),
            format!("{LSB_DIR}/lsb.users:3: column `JL/P` of user `alice` has no effect in LavaCore"),
        ]
    );
}

#[test]
fn lsf_master_list_names_the_candidates_in_order() {
    // Goal: LSF_MASTER_LIST orders the master candidates; without it the first server host is
    // the only one; a name that is not a server host, or one named twice, is an error at its
    // lsf.conf line.
    let (_dir, result) = load(&[]);
    let names = |config: &ClusterConfig| -> Vec<String> {
        config.master_candidates().iter().map(|host| host.name.clone()).collect()
    };
    assert_eq!(names(&result.expect("valid")), ["h1"]);
    let (_dir, result) = load(&[("lsf.conf", Some("LSB_SHAREDIR=work\nLSF_MASTER_LIST=\"h2 h1\"\n"))]);
    let config = result.expect("valid");
    assert_eq!(names(&config), ["h2", "h1"]);
    assert_eq!(config.master_host().map(|host| host.name.as_str()), Some("h2"));
    assert_eq!(
        error(&[("lsf.conf", Some("LSB_SHAREDIR=work\nLSF_MASTER_LIST=\"h2 h9\"\n"))]),
        "lsf.conf:2: `LSF_MASTER_LIST`: `h9` is not a server host of lsf.cluster.c1"
    );
    assert_eq!(
        error(&[("lsf.conf", Some("LSF_MASTER_LIST=\"h2 H2\"\nLSB_SHAREDIR=work\n"))]),
        "lsf.conf:1: LSF_MASTER_LIST names `H2` twice"
    );
}
