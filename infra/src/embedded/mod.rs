mod sqlite_store;

pub use sqlite_store::SqliteStore;
