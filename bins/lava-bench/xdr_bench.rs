//! The `xdr` benchmark (being written).

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("the xdr benchmark is not written yet")
}
