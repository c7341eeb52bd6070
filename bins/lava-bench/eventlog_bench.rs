//! The `eventlog` benchmark (being written).

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("the eventlog benchmark is not written yet")
}
