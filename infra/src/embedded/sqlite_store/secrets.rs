//! The secrets table's raw rows.

use super::*;
use ops_domain::ports::StoreError;
use rusqlite::{params, OptionalExtension};
use time::OffsetDateTime;

/// Raw rows of the secrets table; [`SealedSecrets`](crate::embedded::SealedSecrets) seals
/// what goes in them.
impl SqliteStore {
    /// Writes a secret's value, keeping when it was first stored.
    pub(crate) async fn put_secret_row(&self, name: &str, value: String) -> Result<(), StoreError> {
        let name = name.to_owned();
        let now = OffsetDateTime::now_utc().unix_timestamp();
        self.with(move |c| {
            c.run(
                "INSERT INTO secrets (name, value, stored_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                params![name, value, now],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    /// The names of the secrets that start with `prefix`, and when each was first stored.
    pub(crate) async fn secret_names(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        // `name >= prefix AND name < prefix + U+10FFFF` seeks the primary key, where LIKE
        // would read every row.
        let (from, to) = (prefix.to_owned(), format!("{prefix}\u{10FFFF}"));
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT name, stored_at FROM secrets WHERE name >= ?1 AND name < ?2 ORDER BY name")
                .map_err(unavailable)?;
            let rows = statement
                .query_map([from, to], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(unavailable)?;
            rows.collect::<Result<_, _>>().map_err(unavailable)
        })
        .await
    }

    pub(crate) async fn secret_row(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.look_up(|c| {
            c.prepare_cached("SELECT value FROM secrets WHERE name = ?1")
                .and_then(|mut statement| statement.query_row([name], |row| row.get(0)).optional())
                .map_err(unavailable)
        })
    }

    pub(crate) async fn delete_secret_row(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.with(move |c| {
            c.run("DELETE FROM secrets WHERE name = ?1", [name])
                .map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}
