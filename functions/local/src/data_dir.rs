//! The data directory holds the database, its journal and the API-key pepper: only the
//! service's user may read it (directory 0700, files 0600).

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

/// Writes a new owner-only file; fails if it exists.
pub fn write_private_file(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.create_new(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(contents.as_bytes())
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
}
