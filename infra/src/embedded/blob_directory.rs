//! The blob port in a directory (local mode: beside the database, readable by its owner only).

use async_trait::async_trait;
use ops_domain::files::Blobs;
use ops_domain::ports::BlobError;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub struct BlobDirectory {
    root: PathBuf,
}

impl BlobDirectory {
    pub fn new(root: impl Into<PathBuf>) -> BlobDirectory {
        BlobDirectory { root: root.into() }
    }

    /// The path of `key`; keys are the service's own (`files/<id>.csv`), never a caller's, so
    /// one that could leave the directory is a bug.
    fn path(&self, key: &str) -> Result<PathBuf, BlobError> {
        let safe = !key.is_empty()
            && Path::new(key)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !safe {
            return Err(BlobError::new(format!("not a blob key: {key:?}")));
        }
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl Blobs for BlobDirectory {
    async fn put(&self, key: &str, _content_type: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        let path = self.path(key)?;
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let parent = path.parent().expect("a key has a directory");
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
            // Written aside and renamed: a reader sees the whole blob or none.
            let partial = path.with_extension("partial");
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&partial)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&partial, &path)
        })
        .await
        .map_err(BlobError::new)?
        .map_err(BlobError::new)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let path = self.path(key)?;
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BlobError::new(e)),
        }
    }

    async fn link(&self, _key: &str, _valid_for: time::Duration) -> Result<Option<String>, BlobError> {
        Ok(None)
    }
}
