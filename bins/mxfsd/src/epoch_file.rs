//! The master's durable epoch: one decimal number in a file, replaced atomically (temporary
//! file, fsync, rename, fsync of the folder) so that it never goes backwards, even across a
//! power cut.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::Path;

use anyhow::{Context as _, bail};
use lava_dlm_logic::Epoch;

/// The stored epoch, 0 when the file does not exist yet.
pub fn load(path: &Path) -> anyhow::Result<Epoch> {
    match fs::read_to_string(path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(epoch) => Ok(Epoch(epoch)),
            Err(_) => bail!("{}: not an epoch: {:?}", path.display(), text.trim()),
        },
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Epoch(0)),
        Err(error) => Err(error).with_context(|| format!("read {}", path.display())),
    }
}

/// Stores `epoch` durably.
pub fn store(path: &Path, epoch: Epoch) -> anyhow::Result<()> {
    let folder = path.parent().context("the epoch file has a folder")?;
    fs::create_dir_all(folder).with_context(|| format!("create {}", folder.display()))?;
    let tmp = path.with_extension("epoch.tmp");
    let mut file = File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    file.write_all(format!("{}\n", epoch.0).as_bytes())
        .with_context(|| format!("write {}", tmp.display()))?;
    file.sync_all().with_context(|| format!("fsync {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    File::open(folder)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("fsync {}", folder.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a missing file is epoch 0, a stored epoch reads back, garbage is an error.
    #[test]
    fn store_and_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/h1.epoch");
        assert_eq!(load(&path).expect("missing is 0"), Epoch(0));
        store(&path, Epoch(41)).expect("store");
        store(&path, Epoch(42)).expect("store");
        assert_eq!(load(&path).expect("load"), Epoch(42));
        fs::write(&path, "x").expect("write");
        assert!(load(&path).is_err());
    }
}
