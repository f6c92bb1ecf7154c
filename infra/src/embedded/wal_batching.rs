//! A SQLite VFS that writes a transaction's WAL frames in one system call.
//!
//! SQLite appends each changed page to the WAL with two `pwrite`s (the frame's header, then
//! the page): a create changes some 25 pages, so 50 calls, which measured as much CPU as the
//! rest of its commit's I/O. This VFS is the platform's own (`unix`) with the WAL file's
//! appends gathered in memory and written as one call when the transaction's commit frame is
//! complete, before SQLite syncs the file or tells any reader the commit exists (it publishes a
//! commit in the WAL index only after writing its frames). Every other write, every read, a
//! sync, a truncation or a size check writes what is gathered first, so the file is never
//! read or synced behind what was written to it; the database file and everything else go
//! straight to `unix`. What reaches the disk, and when it is synced, is what SQLite alone
//! would write: only the number of calls changes.

use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
pub(crate) const NAME: &CStr = c"ops-batched-wal";
/// A frame's header: page number, then the database's size in pages (non-zero only in a
/// transaction's commit frame), salts and checksums.
const FRAME_HEADER: usize = 24;
/// A transaction bigger than this is written as it goes rather than all at the end.
const MOST_GATHERED: usize = 1 << 20;
/// The most one call writes: `unix` writes at most 128 KiB a call (it masks the length to
/// 17 bits, as SQLite never asks for more than a page), so more is written in several.
const MOST_A_CALL: usize = 64 << 10;

/// Registers the VFS (once per process); `false` if SQLite has no `unix` VFS to wrap.
pub(crate) fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vfs_find` returns a VFS that lives as long as the process; the copy
        // registered is leaked, so it does too, and SQLite only reads it.
        unsafe {
            let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
            if unix.is_null() {
                return false;
            }
            let mut vfs = *unix;
            vfs.szOsFile = (std::mem::size_of::<WalFile>() + (*unix).szOsFile as usize) as c_int;
            vfs.zName = NAME.as_ptr();
            vfs.pAppData = unix.cast();
            vfs.pNext = std::ptr::null_mut();
            vfs.xOpen = Some(open);
            vfs.xDelete = Some(delete);
            vfs.xAccess = Some(access);
            vfs.xFullPathname = Some(full_pathname);
            ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 0) == ffi::SQLITE_OK
        }
    })
}

/// An open WAL file: SQLite's handle (whose methods are [`WAL_METHODS`]), the `unix` file it
/// wraps (in the same allocation, right after this struct) and what is gathered.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    gathered: *mut Gathered,
}

#[derive(Default)]
struct Gathered {
    /// Where `bytes` go in the file.
    offset: i64,
    bytes: Vec<u8>,
    /// The last append was a commit frame's header: its page completes the transaction.
    commit_frame: bool,
}

unsafe fn unix(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    (*vfs).pAppData.cast()
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let unix = unix(vfs);
    let open_unix = (*unix).xOpen.expect("unix opens files");
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        return open_unix(unix, name, file, flags, out_flags);
    }
    let wal = file.cast::<WalFile>();
    let inner = wal.add(1).cast::<ffi::sqlite3_file>();
    (*wal).base.pMethods = std::ptr::null();
    let rc = open_unix(unix, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    (*wal).inner = inner;
    (*wal).gathered = Box::into_raw(Box::default());
    (*wal).base.pMethods = &WAL_METHODS;
    ffi::SQLITE_OK
}

unsafe extern "C" fn delete(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    let unix = unix(vfs);
    (*unix).xDelete.expect("unix deletes")(unix, name, sync_dir)
}

unsafe extern "C" fn access(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, flags: c_int, out: *mut c_int) -> c_int {
    let unix = unix(vfs);
    (*unix).xAccess.expect("unix checks access")(unix, name, flags, out)
}

unsafe extern "C" fn full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let unix = unix(vfs);
    (*unix).xFullPathname.expect("unix names paths")(unix, name, n, out)
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe fn parts(file: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, *mut Gathered) {
    let wal = file.cast::<WalFile>();
    ((*wal).inner, (*wal).gathered)
}

unsafe fn methods<'a>(inner: *mut ffi::sqlite3_file) -> &'a ffi::sqlite3_io_methods {
    &*(*inner).pMethods
}

/// Writes what is gathered: one call for a create's commit, one per 64 KiB for a bigger one.
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, gathered) = parts(file);
    let gathered = &mut *gathered;
    let write = methods(inner).xWrite.expect("unix writes");
    let mut rc = ffi::SQLITE_OK;
    let mut offset = gathered.offset;
    for chunk in gathered.bytes.chunks(MOST_A_CALL) {
        rc = write(inner, chunk.as_ptr().cast(), chunk.len() as c_int, offset);
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += chunk.len() as i64;
    }
    gathered.bytes.clear();
    rc
}

unsafe extern "C" fn write(file: *mut ffi::sqlite3_file, data: *const c_void, amount: c_int, offset: i64) -> c_int {
    let (_, gathered) = parts(file);
    let appends = {
        let gathered = &*gathered;
        gathered.bytes.is_empty() || offset == gathered.offset + gathered.bytes.len() as i64
    };
    if !appends {
        // Out of order (a frame rewritten in place, its checksum redone): what came before goes
        // first, then this, straight to the file.
        (*gathered).commit_frame = false;
        return flushed(file, |inner, unix| {
            unix.xWrite.expect("unix writes")(inner, data, amount, offset)
        });
    }
    let bytes = std::slice::from_raw_parts(data.cast::<u8>(), amount as usize);
    let completes_commit = {
        let gathered = &mut *gathered;
        if gathered.bytes.is_empty() {
            gathered.offset = offset;
        }
        gathered.bytes.extend_from_slice(bytes);
        let completes = std::mem::take(&mut gathered.commit_frame);
        gathered.commit_frame = !completes && bytes.len() == FRAME_HEADER && bytes[4..8] != [0; 4];
        completes || (!gathered.commit_frame && gathered.bytes.len() >= MOST_GATHERED)
    };
    if completes_commit {
        return flush(file);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let flushed = flush(file);
    let (inner, gathered) = parts(file);
    let closed = methods(inner).xClose.expect("unix closes")(inner);
    drop(Box::from_raw(gathered));
    (*file).pMethods = std::ptr::null();
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        closed
    }
}

/// Writes what is gathered, then does `then` on the `unix` file: for everything that must
/// not run behind the writes (a read, a sync, a truncation, a size check, a file control).
unsafe fn flushed(
    file: *mut ffi::sqlite3_file,
    then: impl FnOnce(*mut ffi::sqlite3_file, &ffi::sqlite3_io_methods) -> c_int,
) -> c_int {
    let rc = flush(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (inner, _) = parts(file);
    then(inner, methods(inner))
}

unsafe extern "C" fn read(file: *mut ffi::sqlite3_file, data: *mut c_void, amount: c_int, offset: i64) -> c_int {
    flushed(file, |inner, unix| {
        unix.xRead.expect("unix reads")(inner, data, amount, offset)
    })
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    flushed(file, |inner, unix| unix.xTruncate.expect("unix truncates")(inner, size))
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flushed(file, |inner, unix| unix.xSync.expect("unix syncs")(inner, flags))
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    flushed(file, |inner, unix| {
        unix.xFileSize.expect("unix sizes files")(inner, size)
    })
}

unsafe extern "C" fn file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    flushed(file, |inner, unix| {
        unix.xFileControl.expect("unix controls files")(inner, op, arg)
    })
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (inner, _) = parts(file);
    methods(inner).xLock.expect("unix locks")(inner, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (inner, _) = parts(file);
    methods(inner).xUnlock.expect("unix unlocks")(inner, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let (inner, _) = parts(file);
    methods(inner).xCheckReservedLock.expect("unix checks locks")(inner, out)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, _) = parts(file);
    methods(inner).xSectorSize.expect("unix knows sectors")(inner)
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, _) = parts(file);
    methods(inner).xDeviceCharacteristics.expect("unix knows the device")(inner)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rusqlite::{Connection, OpenFlags};
    use std::path::Path;

    /// Write system calls this process has made (`/proc/self/io`).
    fn write_calls() -> u64 {
        let io = std::fs::read_to_string("/proc/self/io").unwrap();
        io.lines()
            .find_map(|line| line.strip_prefix("syscw: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn open(path: &Path, batched: bool) -> Connection {
        let connection = if batched {
            assert!(register());
            Connection::open_with_flags_and_vfs(path, OpenFlags::default(), NAME).unwrap()
        } else {
            Connection::open(path).unwrap()
        };
        connection
            .execute_batch(
                "PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
                 CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS rows_by_body ON rows (body);",
            )
            .unwrap();
        connection
    }

    /// Commits `rows` rows of 500 bytes from id `first` in one transaction (twenty rows are
    /// some thirty pages with the index).
    fn commit_rows(connection: &mut Connection, first: i64, rows: i64) {
        let tx = connection.transaction().unwrap();
        for id in first..first + rows {
            tx.execute(
                "INSERT INTO rows (id, body) VALUES (?1, ?2)",
                rusqlite::params![id, format!("{id:0>500}")],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }

    /// [`commit_rows`], answering the write calls the commit made.
    fn commit_counting_writes(connection: &mut Connection, first: i64, rows: i64) -> u64 {
        let before = write_calls();
        commit_rows(connection, first, rows);
        write_calls() - before
    }

    #[test]
    fn a_commit_writes_its_wal_frames_in_one_call_and_readers_see_it_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.sqlite");
        let mut plain = open(&dir.path().join("plain.sqlite"), false);
        let mut batched = open(&path, true);
        let reader = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut next = 1;
        for synchronous in ["FULL", "NORMAL", "FULL", "NORMAL"] {
            for connection in [&plain, &batched] {
                connection
                    .execute_batch(&format!("PRAGMA synchronous = {synchronous}"))
                    .unwrap();
            }
            let alone = commit_counting_writes(&mut plain, next, 20);
            let gathered = commit_counting_writes(&mut batched, next, 20);
            next += 20;
            assert!(alone >= 40, "SQLite alone writes each frame in two calls ({alone})");
            assert!(
                gathered <= 2,
                "one call for the frames (and the WAL's header once): {gathered}"
            );
            // Another connection, with the platform's own VFS, reads the commit at once.
            let seen: i64 = reader.query_row("SELECT count(*) FROM rows", [], |r| r.get(0)).unwrap();
            assert_eq!(seen, next - 1, "synchronous = {synchronous}");
        }
        // Transactions of hundreds of pages, several calls each.
        for rows in [300, 550, 1_200] {
            commit_rows(&mut batched, next, rows);
            next += rows;
            let seen: i64 = reader.query_row("SELECT count(*) FROM rows", [], |r| r.get(0)).unwrap();
            assert_eq!(seen, next - 1);
        }
        // An update of every row rolled back, then one of half of them committed.
        let tx = batched.transaction().unwrap();
        tx.execute("UPDATE rows SET body = 'x' || body", []).unwrap();
        drop(tx);
        batched
            .execute("UPDATE rows SET body = 'y' || body WHERE id % 2 = 0", [])
            .unwrap();
        drop(batched);
        let check = Connection::open(&path).unwrap();
        let ok: String = check.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        let changed: i64 = check
            .query_row("SELECT count(*) FROM rows WHERE body LIKE 'y%'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(changed, (next - 1) / 2);
    }
}
