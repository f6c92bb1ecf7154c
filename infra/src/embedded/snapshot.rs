//! A consistent copy of a live SQLite file, taken beside its writer (local mode's backups).

use crate::embedded::sqlite_store::unavailable;
use ops_domain::ports::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// Copies the database at `from`, as of its last commit, into `to` (a missing or empty file),
/// and syncs the copy. `VACUUM INTO` reads one snapshot, which WAL mode lets it take while the
/// writer goes on committing, so the copy is consistent; it is also compacted, and has no
/// journal of its own. The source is opened as it is and never created: a wrong path is an
/// error, not an empty backup.
pub fn copy_database(from: &Path, to: &Path) -> Result<(), StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let source = Connection::open_with_flags(from, flags).map_err(unavailable)?;
    source
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unavailable)?;
    let target = to
        .to_str()
        .ok_or_else(|| unavailable(format!("{} is not a UTF-8 path", to.display())))?;
    source.execute("VACUUM INTO ?1", [target]).map_err(unavailable)?;
    std::fs::File::open(to)
        .and_then(|copy| copy.sync_all())
        .map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::copy_database;
    use crate::embedded::SqliteStore;
    use ops_domain::access::{AccessStore, Customer, CustomerStatus};
    use ops_domain::ports::{Changeset, Commit, Write};

    fn customer(n: usize) -> Customer {
        Customer {
            id: format!("cus_{n:04}").as_str().into(),
            name: format!("Customer {n}"),
            status: CustomerStatus::Active,
            metadata: Default::default(),
            collection_reserve: Default::default(),
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            version: 1,
        }
    }

    fn insert(n: usize) -> Changeset {
        Changeset {
            writes: vec![Write::InsertCustomer(customer(n))],
        }
    }

    #[tokio::test]
    async fn a_copy_taken_beside_the_writer_holds_every_commit_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (live, copy) = (dir.path().join("live.sqlite"), dir.path().join("copy.sqlite"));
        let store = SqliteStore::open(&live).unwrap();
        for n in 0..50 {
            store.commit(insert(n)).await.unwrap();
        }
        // The writer keeps its connection open, and the last commits are still in its WAL.
        copy_database(&live, &copy).unwrap();
        store.commit(insert(50)).await.unwrap();

        let restored = SqliteStore::open(&copy).unwrap();
        for n in 0..50 {
            assert!(
                restored.customer(&customer(n).id).await.unwrap().is_some(),
                "customer {n}"
            );
        }
        assert!(restored.customer(&customer(50).id).await.unwrap().is_none());
        // A source that is not there is an error, and nothing is made in its place.
        let missing = dir.path().join("missing.sqlite");
        assert!(copy_database(&missing, &dir.path().join("other.sqlite")).is_err());
        assert!(!missing.exists());
    }
}
