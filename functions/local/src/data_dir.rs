//! The data directory holds each environment's database (with its journal), the sandbox
//! rail's ledger and the uploaded files' bytes, and the API-key pepper, under the names this
//! module gives them: only the service's user may read it (directory 0700, files 0600).

use ops_domain::access::Environment;
use std::path::{Path, PathBuf};

/// Creates the directory (owner only) if it is missing.
pub fn create(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates `path` empty and owner-only if it is missing. SQLite gives a database's journal
/// files the database file's permissions, so creating the file first covers them too.
pub fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map(drop)
}

/// Writes a new owner-only file, synced; fails if it exists.
pub fn write_private_file(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.create_new(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_ref())?;
    file.sync_all()
}

/// The file holding the API-key pepper when `OPS_API_KEY_PEPPER` is not set (both
/// environments share it).
pub const PEPPER_FILE: &str = "api-key-pepper";

/// An environment's database.
pub fn database(dir: &Path, environment: Environment) -> PathBuf {
    dir.join(format!("ops-{}.sqlite", environment.as_str()))
}

/// The sandbox rail's ledger of an environment.
pub fn sandbox_ledger(dir: &Path, environment: Environment) -> PathBuf {
    dir.join(format!("rail-sandbox-{}.sqlite", environment.as_str()))
}

/// The directory of an environment's files' bytes.
pub fn blobs(dir: &Path, environment: Environment) -> PathBuf {
    dir.join(format!("blobs-{}", environment.as_str()))
}

/// One environment's data held by this process: local mode assumes it is the only process on
/// its database (at start it gives back what a dead process left in flight, which would take
/// a live one's work from it). Released when dropped, or by the kernel when the process dies.
#[derive(Debug)]
pub struct Held {
    _lock: std::fs::File,
}

/// Why the data could not be held.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("{path} is held by another running ops-local (pid {pid}); stop it, or give this one another --data-dir")]
    InUse { path: String, pid: String },
    #[error("cannot lock {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// Holds `path` (a lock file, created owner-only if missing) for this process, writing its
/// pid into it for whoever finds it held.
pub fn hold(path: &Path) -> Result<Held, HoldError> {
    use std::io::{Read, Seek, Write};
    let failed = |source| HoldError::Io {
        path: path.display().to_string(),
        source,
    };
    create_private_file(path).map_err(failed)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(failed)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            file.read_to_string(&mut pid).map_err(failed)?;
            return Err(HoldError::InUse {
                path: path.display().to_string(),
                pid: pid.trim().to_owned(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(failed(e)),
    }
    file.set_len(0).map_err(failed)?;
    file.rewind().map_err(failed)?;
    writeln!(file, "{}", std::process::id()).map_err(failed)?;
    Ok(Held { _lock: file })
}

/// The directory and the files in it that others than the owner may read or write.
pub fn too_open(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let open =
            |path: &Path| -> std::io::Result<bool> { Ok(std::fs::metadata(path)?.permissions().mode() & 0o077 != 0) };
        let mut found = vec![];
        if open(dir)? {
            found.push(dir.to_path_buf());
        }
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_file() && open(&path)? {
                found.push(path);
            }
        }
        Ok(found)
    }
    #[cfg(not(unix))]
    Ok(vec![])
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn what_it_creates_is_owner_only_and_looser_files_are_named() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        create(&dir).unwrap();
        create_private_file(&dir.join("db")).unwrap();
        write_private_file(&dir.join("pepper"), "x").unwrap();
        assert_eq!(too_open(&dir).unwrap(), Vec::<PathBuf>::new());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(&dir), mode(&dir.join("db")), mode(&dir.join("pepper"))),
            (0o700, 0o600, 0o600)
        );

        std::fs::set_permissions(dir.join("db"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(too_open(&dir).unwrap(), vec![dir.join("db")]);
    }

    #[test]
    fn data_is_held_by_one_holder_at_a_time_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("ops-test.lock");
        let held = hold(&lock).unwrap();
        let refused = hold(&lock).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("pid {}", std::process::id())) && refused.contains("ops-test.lock"),
            "{refused}"
        );
        drop(held);
        let _again = hold(&lock).unwrap();
        let mode = std::fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
