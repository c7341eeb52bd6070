//! The hand-written parts of every page: what LavaCore does, its output, exit status,
//! environment and files, in [`crate::markup`]; the options of the LSF commands next to
//! them. One module per family: [`jobs`] (bsub, bjobs, ...), [`cluster`] (bhosts,
//! badmin, lsload, ...), [`daemons`] (the daemons, coordctl, mxfsctl, lava-shepherd).

pub mod cluster;
pub mod daemons;
pub mod jobs;

use crate::clap_page::ClapPage;
use crate::lsf::LsfPage;

/// Every page of an LSF-style command.
pub fn lsf_pages() -> Vec<LsfPage> {
    let mut pages = jobs::pages();
    pages.extend(cluster::pages());
    pages.push(daemons::shepherd());
    pages
}

/// Every page of a clap program.
pub fn clap_pages() -> Vec<ClapPage> {
    daemons::pages()
}

/// EXIT STATUS of the commands that ask mbatchd.
pub(crate) const EXIT_BATCH: &str = "\
@0
The command did what was asked (for several jobs or names: for every one of them).

@255
Anything failed, a usage error included (LSF's `exit(-1)`): a job or name not found, a
refusal by mbatchd, mbatchd not reachable within the retry bound. The reason is on standard
error.

`-h` and `-V` exit 0.";

/// ENVIRONMENT of the commands that ask mbatchd.
pub(crate) const ENV_BATCH: &str = "\
@LSF_ENVDIR
The folder holding `lsf.conf` (default `/etc`); mbatchd is found through it (the first
server host of `lsf.cluster.<cluster>`, port `LSB_MBD_PORT`).

@LAVA_RETRY_SECS
How long to keep trying while mbatchd or the local sbatchd cannot be reached, in seconds
(LavaCore's; 0: one attempt). Default 60.

@LSB_NTRIES
LSF's bound: this many attempts, and no time bound (used when `LAVA_RETRY_SECS` is unset).

@LAVA_HOST
This host's name as `lsf.cluster` lists it, when it is not the short host name.";

/// ENVIRONMENT of the commands that only read the configuration or ask lim.
pub(crate) const ENV_CONF: &str = "\
@LSF_ENVDIR
The folder holding `lsf.conf` (default `/etc`).";

/// FILES of the commands that ask mbatchd.
pub(crate) const FILES_BATCH: &str = "\
@$LSF_ENVDIR/lsf.conf
The cluster's configuration: where mbatchd listens, the other files' folders.

@$LSF_ENVDIR/lsf.shared, lsf.cluster.<cluster>
The cluster's name and hosts; the master is the first server host.

The command's credential comes from the local sbatchd's socket (`LAVA_CMD_SOCKET` in
lsf.conf): sbatchd must run on every host where users type commands.";

/// FILES of the commands that only read the configuration.
pub(crate) const FILES_CONF: &str = "\
@$LSF_ENVDIR/lsf.conf
The cluster's configuration and the folders of the other files.

@$LSF_ENVDIR/lsf.shared, lsf.cluster.<cluster>, lsbatch/<cluster>/configdir/lsb.*
The cluster's hosts, and the batch configuration (`lsb.params`, `lsb.queues`, `lsb.hosts`,
`lsb.users`).";

/// The flags every LSF command has.
pub(crate) const HELP: crate::lsf::Opt =
    crate::lsf::Opt::flag("h", "Prints the command's usage on standard error and exits 0.");
/// `-V`.
pub(crate) const VERSION: crate::lsf::Opt =
    crate::lsf::Opt::flag("V", "Prints LavaCore's version on standard error and exits 0.");
