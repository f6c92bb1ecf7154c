//! `ops-local backup --to DIR`: a copy of one environment's data, taken while the server runs
//! (or not), that `ops-local --data-dir DIR` starts on as it was. The databases are copied as
//! of their last commit (SQLite's `VACUUM INTO`, beside the writer), the sandbox rail's ledger
//! after the service's database, so that it knows every submission the copy made (one it
//! knows and the copy does not is asked about, as after a crash); then the files' bytes,
//! which are written before the database names them and never changed, so every file the
//! copied database names is in the copy; then the API-key pepper, without which no key in
//! the copy would authenticate.

use crate::data_dir;
use ops_domain::access::Environment;
use std::path::{Path, PathBuf};

/// What a backup copied.
#[derive(Debug)]
pub struct Backup {
    pub to: PathBuf,
    /// Each file copied, named from `to`, and its size in bytes, in the order copied.
    pub files: Vec<(PathBuf, u64)>,
}

impl std::fmt::Display for Backup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bytes: u64 = self.files.iter().map(|(_, bytes)| bytes).sum();
        write!(
            f,
            "copied {} files ({bytes} bytes) to {}; start ops-local with --data-dir {} to run on it",
            self.files.len(),
            self.to.display(),
            self.to.display()
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("no {environment} database in {dir}: give the --data-dir (and --environment) the server runs with")]
    NoDatabase { dir: String, environment: &'static str },
    #[error("{0} is not empty: a backup goes to a new directory, so it never mixes with another")]
    NotEmpty(String),
    #[error("{path}: {message}")]
    Failed { path: String, message: String },
}

impl BackupError {
    fn at(path: &Path, error: impl std::fmt::Display) -> Self {
        BackupError::Failed {
            path: path.display().to_string(),
            message: error.to_string(),
        }
    }
}

/// Copies `environment`'s data in `data_dir` to `to`, a directory that is missing or empty;
/// what it makes is owner-only, as the data directory is. The copy is made beside `to` and
/// renamed into place once whole, so a backup that fails leaves nothing a server could start
/// on by mistake.
pub fn backup(data_dir: &Path, environment: Environment, to: &Path) -> Result<Backup, BackupError> {
    let database = data_dir::database(data_dir, environment);
    if !database.is_file() {
        return Err(BackupError::NoDatabase {
            dir: data_dir.display().to_string(),
            environment: environment.as_str(),
        });
    }
    if std::fs::read_dir(to).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(BackupError::NotEmpty(to.display().to_string()));
    }
    let name = to
        .file_name()
        .ok_or_else(|| BackupError::at(to, "name a directory to back up into"))?;
    let staging = to.with_file_name(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
    let copied = copy_into(data_dir, environment, &staging).and_then(|mut copied| {
        std::fs::rename(&staging, to).map_err(|e| BackupError::at(to, e))?;
        let parent = to
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_directory(parent)?;
        copied.to = to.to_path_buf();
        Ok(copied)
    });
    if copied.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    copied
}

/// The copy itself, into `to` (made here).
fn copy_into(data_dir: &Path, environment: Environment, to: &Path) -> Result<Backup, BackupError> {
    data_dir::create(to).map_err(|e| BackupError::at(to, e))?;
    let mut copied = Backup {
        to: to.to_path_buf(),
        files: vec![],
    };
    let database = data_dir::database(data_dir, environment);
    let sandbox = data_dir::sandbox_ledger(data_dir, environment);
    let databases = [Some(database), sandbox.is_file().then_some(sandbox)];
    for from in databases.into_iter().flatten() {
        let into = to.join(from.file_name().expect("a database file has a name"));
        data_dir::create_private_file(&into).map_err(|e| BackupError::at(&into, e))?;
        ops_infra::embedded::copy_database(&from, &into).map_err(|e| BackupError::at(&from, e))?;
        copied.note(&into)?;
    }
    let blobs = data_dir::blobs(data_dir, environment);
    if blobs.is_dir() {
        copy_tree(&blobs, &to.join(blobs.file_name().expect("named")), &mut copied)?;
    }
    let pepper = data_dir.join(data_dir::PEPPER_FILE);
    if pepper.is_file() {
        copy_file(&pepper, &to.join(data_dir::PEPPER_FILE), &mut copied)?;
    }
    sync_directory(to)?;
    Ok(copied)
}

impl Backup {
    fn note(&mut self, path: &Path) -> Result<(), BackupError> {
        let bytes = std::fs::metadata(path).map_err(|e| BackupError::at(path, e))?.len();
        let name = path.strip_prefix(&self.to).unwrap_or(path);
        self.files.push((name.to_path_buf(), bytes));
        Ok(())
    }
}

/// Copies a directory of blobs, leaving out blobs still being written (`.partial`).
fn copy_tree(from: &Path, to: &Path, copied: &mut Backup) -> Result<(), BackupError> {
    data_dir::create(to).map_err(|e| BackupError::at(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| BackupError::at(from, e))? {
        let path = entry.map_err(|e| BackupError::at(from, e))?.path();
        let into = to.join(path.file_name().expect("an entry has a name"));
        if path.is_dir() {
            copy_tree(&path, &into, copied)?;
        } else if path.extension().is_none_or(|extension| extension != "partial") {
            copy_file(&path, &into, copied)?;
        }
    }
    sync_directory(to)
}

fn copy_file(from: &Path, to: &Path, copied: &mut Backup) -> Result<(), BackupError> {
    let bytes = std::fs::read(from).map_err(|e| BackupError::at(from, e))?;
    data_dir::write_private_file(to, bytes).map_err(|e| BackupError::at(to, e))?;
    copied.note(to)
}

/// Makes the directory's new entries durable (each file was synced when it was written).
fn sync_directory(dir: &Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| BackupError::at(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_that_fails_leaves_nothing_behind() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        data_dir::create(&data).unwrap();
        ops_infra::embedded::SqliteStore::open(&data_dir::database(&data, Environment::Test)).unwrap();
        // A blob that cannot be read: the copy fails after the database is in it.
        let blobs = data_dir::blobs(&data, Environment::Test).join("files");
        std::fs::create_dir_all(&blobs).unwrap();
        std::os::unix::fs::symlink(root.path().join("gone"), blobs.join("file_1.csv")).unwrap();

        let to = root.path().join("backup");
        assert!(matches!(
            backup(&data, Environment::Test, &to),
            Err(BackupError::Failed { .. })
        ));
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["data"], "a failed backup left {left:?}");

        std::fs::remove_file(blobs.join("file_1.csv")).unwrap();
        let copied = backup(&data, Environment::Test, &to).unwrap();
        assert!(!copied.files.is_empty());
        assert!(copied
            .files
            .iter()
            .all(|(name, _)| name.is_relative() && to.join(name).is_file()));
        assert!(data_dir::database(&to, Environment::Test).is_file());
        assert!(matches!(
            backup(&data, Environment::Test, &to),
            Err(BackupError::NotEmpty(_))
        ));
    }
}
