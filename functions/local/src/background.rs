//! The pipeline beside the API: a thread and runtime of its own at a lower CPU priority, so
//! that when requests and the pipeline's triggers both want the machine's cores, a request's
//! answer goes first and the triggers take what is left (catching up whenever requests
//! pause). Nothing else differs: the same driver, store and durability.

use std::future::Future;
use tokio::sync::oneshot;

/// How much lower than the API's threads the pipeline's run (`nice`; its blocking threads,
/// started from it, inherit it).
const PIPELINE_NICE: i32 = 10;

/// The running pipeline; dropping it stops it.
pub(crate) struct Background {
    _stop: oneshot::Sender<()>,
}

pub(crate) fn spawn(pipeline: impl Future<Output = ()> + Send + 'static) -> std::io::Result<Background> {
    let (stop, stopped) = oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new().name("ops-pipeline".into()).spawn(move || {
        lower_this_threads_priority();
        runtime.block_on(async {
            tokio::select! {
                () = pipeline => {}
                _ = stopped => {}
            }
        });
    })?;
    Ok(Background { _stop: stop })
}

#[cfg(target_os = "linux")]
fn lower_this_threads_priority() {
    // On Linux the nice value is a thread's own, and threads it starts inherit it.
    // SAFETY: plain system calls on this thread's own id.
    let changed = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, PIPELINE_NICE) };
    if changed != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "the pipeline runs at the API's priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_this_threads_priority() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Tells its channel when it is dropped, as a pipeline's future is when it stops.
    struct DropSignal(mpsc::Sender<&'static str>);

    impl Drop for DropSignal {
        fn drop(&mut self) {
            let _ = self.0.send("stopped");
        }
    }

    #[test]
    fn the_pipeline_runs_below_the_apis_priority_and_stops_when_dropped() {
        let (tell, heard) = mpsc::channel();
        let pipeline = async move {
            let signal = DropSignal(tell.clone());
            // SAFETY: reads this thread's own nice value.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            let blocking = tokio::task::spawn_blocking(|| unsafe {
                libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
            })
            .await
            .unwrap();
            let _ = signal.0.send(if (nice, blocking) == (PIPELINE_NICE, PIPELINE_NICE) {
                "lowered"
            } else {
                "not lowered"
            });
            std::future::pending::<()>().await;
        };
        let background = spawn(pipeline).unwrap();
        assert_eq!(heard.recv_timeout(Duration::from_secs(5)), Ok("lowered"));
        // SAFETY: reads this (the test's) thread's own nice value.
        let here = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        assert_eq!(here, 0, "the caller keeps its priority");
        drop(background);
        assert_eq!(heard.recv_timeout(Duration::from_secs(5)), Ok("stopped"));
    }
}
