//! Webhook delivery over real HTTP, only to the receivers the target policy allows, with a
//! process's places shared fairly between its receivers ([`holds`]).

pub mod holds;

use async_trait::async_trait;
use holds::{Holds, Refused};
use ops_domain::ports::WebhookSender;
use ops_domain::webhooks::signature;
use ops_domain::webhooks::{HeldBack, Posted, TargetPolicy, DELIVERY_TIMEOUT};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The most webhook requests one process keeps open at once. Local mode's senders (each a
/// batch of ten at a time) wait for a place here, so one sender reading or recording its batch
/// leaves its places to another's posts instead of idle; a function in the cloud sends one
/// batch of ten.
pub const MAX_OPEN_POSTS: usize = 40;

pub struct HttpWebhookSender {
    client: reqwest::Client,
    policy: TargetPolicy,
    open_posts: tokio::sync::Semaphore,
    holds: Holds,
}

impl HttpWebhookSender {
    /// A receiver that has not answered within `timeout` counts as a failed attempt.
    pub fn new(policy: TargetPolicy, timeout: std::time::Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("payment-operations-service/", env!("CARGO_PKG_VERSION")))
            // A receiver's redirect is not followed: the signed body goes where it was registered.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would make the connection somewhere the address check never saw.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver { policy }))
            .build()
            .expect("HTTP client builds");
        HttpWebhookSender {
            client,
            policy,
            open_posts: tokio::sync::Semaphore::new(MAX_OPEN_POSTS),
            holds: Holds::default(),
        }
    }

    pub fn with_policy(policy: TargetPolicy) -> Self {
        HttpWebhookSender::new(policy, DELIVERY_TIMEOUT)
    }

    /// Posts with the signature; the receiver's status, or what kept it from answering
    /// (`stalled`: it timed out or could not be reached).
    async fn send(&self, url: reqwest::Url, signature: &str, body: Vec<u8>) -> Result<u16, Unanswered> {
        let response = self
            .client
            .post(url)
            .header("Content-Type", "application/json")
            .header(signature::HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let (stalled, reason) = if e.is_timeout() {
                    (true, "no answer within the delivery timeout".to_string())
                } else if e.is_connect() {
                    // The same words for a refused port, a closed host and a refused address, so
                    // the attempts list is no port scanner.
                    (true, "could not connect to the receiver".to_string())
                } else {
                    (false, format!("request failed: {e}"))
                };
                Unanswered { stalled, reason }
            })?;
        Ok(response.status().as_u16())
    }
}

/// Why a receiver did not answer, and whether that was a stall (it holds the receiver back).
struct Unanswered {
    stalled: bool,
    reason: String,
}

/// Resolves a receiver's name at connection time and keeps only the addresses the policy
/// allows: a name whose DNS answer changes after it was registered (rebinding) still cannot
/// reach a loopback, private or link-local address.
struct GuardedResolver {
    policy: TargetPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved.into_iter().filter(|a| policy.allows_ip(a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no address webhooks may be sent to").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[async_trait]
impl WebhookSender for HttpWebhookSender {
    async fn post(&self, url: &str, signature: &str, body: Vec<u8>) -> Result<Posted, HeldBack> {
        // Checked again at sending time: an address literal never reaches the resolver, and a
        // URL stored before a stricter policy must not be sent to either.
        let url = match self.policy.check_url(url) {
            Ok(url) => url,
            Err(reason) => return Ok(Posted::not_sent(format!("not sent: {reason}"))),
        };
        let origin = url.origin().ascii_serialization();
        let (_place, admitted) = loop {
            let place = self.open_posts.acquire().await.expect("the semaphore is never closed");
            // Admitted once it has a place, so a receiver that stalled while this post waited
            // does not get it.
            match self.holds.admit(&origin, Instant::now()) {
                Ok(admitted) => break (place, admitted),
                Err(Refused::HandedBack(retry_in)) => return Err(HeldBack { retry_in }),
                Err(Refused::AtShare { ended, until }) => {
                    // The place is left to others while this waits for its receiver's.
                    drop(place);
                    let _ = tokio::time::timeout_at(until.into(), ended).await;
                }
            }
        };
        let started = Instant::now();
        let answer = self.send(url, signature, body).await;
        let stalled = answer.as_ref().is_err_and(|unanswered| unanswered.stalled);
        admitted.finish(stalled, Instant::now());
        Ok(Posted {
            answer: answer.map_err(|unanswered| unanswered.reason),
            took: started.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A receiver on loopback that counts the requests that reach it.
    async fn receiver() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
        (port, hits)
    }

    #[tokio::test]
    async fn a_public_only_sender_never_connects_to_loopback_by_address_or_by_name() {
        let (port, hits) = receiver().await;
        let strict = HttpWebhookSender::with_policy(TargetPolicy::PUBLIC_ONLY);
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!("https://127.0.0.1:{port}/"),
            "https://127.0.0.1/".to_string(),
            "https://[::ffff:127.0.0.1]/".to_string(),
        ] {
            assert!(
                strict.post(&url, "t=1,v1=x", vec![]).await.unwrap().answer.is_err(),
                "{url}"
            );
        }
        // A name is checked where the connection is made: what it resolves to decides, so a
        // name that passed registration and later resolves to loopback is still refused.
        let by_name = GuardedResolver {
            policy: TargetPolicy::PUBLIC_ONLY,
        }
        .resolve("localhost".parse().unwrap())
        .await;
        assert!(by_name.is_err());
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);

        // The same receiver is reachable when local targets are allowed (a test stack).
        let local = HttpWebhookSender::with_policy(TargetPolicy { allow_local: true });
        assert_eq!(
            local
                .post(&format!("http://localhost:{port}/"), "t=1,v1=x", vec![])
                .await
                .unwrap()
                .answer,
            Ok(200)
        );
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// `count` posts to `url`, each on a task of its own.
    fn spawn_posts(
        sender: &Arc<HttpWebhookSender>,
        url: &str,
        count: usize,
    ) -> Vec<tokio::task::JoinHandle<Result<Posted, HeldBack>>> {
        (0..count)
            .map(|_| {
                let (sender, url) = (sender.clone(), url.to_owned());
                tokio::spawn(async move { sender.post(&url, "t=1,v1=x", vec![]).await })
            })
            .collect()
    }

    /// A receiver on loopback that holds every request open until `release` turns true,
    /// counting how many are open at once (the most, and now).
    async fn holding_receiver(
        release: tokio::sync::watch::Receiver<bool>,
    ) -> (
        u16,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted, highest) = (open.clone(), most.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (open, most, mut release) = (counted.clone(), highest.clone(), release.clone());
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    most.fetch_max(open.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    let _ = release.wait_for(|go| *go).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                    let _ = socket
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        (port, open, most)
    }

    #[tokio::test]
    async fn a_process_keeps_at_most_its_share_of_posts_open_and_times_each_from_its_own_start() {
        use std::sync::atomic::Ordering;
        let (release, released) = tokio::sync::watch::channel(false);
        let (port, open, most) = holding_receiver(released).await;
        let sender = Arc::new(HttpWebhookSender::with_policy(TargetPolicy { allow_local: true }));
        let url = format!("http://127.0.0.1:{port}/");
        let posts = spawn_posts(&sender, &url, MAX_OPEN_POSTS + 5);
        while open.load(Ordering::SeqCst) < MAX_OPEN_POSTS {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The five beyond the share wait for a place instead of reaching the receiver.
        let held = Duration::from_millis(400);
        tokio::time::sleep(held).await;
        assert_eq!(most.load(Ordering::SeqCst), MAX_OPEN_POSTS);
        release.send(true).unwrap();
        let mut took = vec![];
        for post in posts {
            let posted = post.await.unwrap().expect("a receiver that answers is never held back");
            assert_eq!(posted.answer, Ok(200));
            took.push(posted.took);
        }
        took.sort();
        // Those held answered after the hold; those that waited for a place were answered at
        // once, and their time is the receiver's, not the wait.
        assert!(took[..5].iter().all(|t| *t < held), "{took:?}");
        assert!(took[5..].iter().all(|t| *t >= held), "{took:?}");
    }

    /// A sender sharing its places: it has posted to an answering receiver (`answering`, its
    /// `hits`), and `backlog` posts to another that holds each open until `release`, its
    /// share of them open now (`most`: the most it had open at once).
    struct BacklogAtShare {
        release: tokio::sync::watch::Sender<bool>,
        most: Arc<std::sync::atomic::AtomicUsize>,
        hits: Arc<std::sync::atomic::AtomicUsize>,
        sender: Arc<HttpWebhookSender>,
        answering: String,
        backlog: Vec<tokio::task::JoinHandle<Result<Posted, HeldBack>>>,
    }

    async fn backlog_at_share(backlog: usize) -> BacklogAtShare {
        use std::sync::atomic::Ordering;
        let (release, released) = tokio::sync::watch::channel(false);
        let (holding_port, open, most) = holding_receiver(released).await;
        let (answering_port, hits) = receiver().await;
        let sender = Arc::new(HttpWebhookSender::with_policy(TargetPolicy { allow_local: true }));
        let answering = format!("http://127.0.0.1:{answering_port}/");
        assert_eq!(
            sender.post(&answering, "t=1,v1=x", vec![]).await.unwrap().answer,
            Ok(200)
        );
        let holding = format!("http://127.0.0.1:{holding_port}/");
        let backlog = spawn_posts(&sender, &holding, backlog);
        while open.load(Ordering::SeqCst) < holds::SHARE {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        BacklogAtShare {
            release,
            most,
            hits,
            sender,
            answering,
            backlog,
        }
    }

    /// A receiver that hangs before any post to it has timed out still leaves places for the
    /// others the process posts to: its backlog takes its share, the rest waits, then is
    /// handed back.
    #[tokio::test]
    async fn a_receiver_that_hangs_leaves_places_for_others_before_its_first_timeout() {
        use std::sync::atomic::Ordering;
        let hanging = backlog_at_share(MAX_OPEN_POSTS + 5).await;
        let started = Instant::now();
        for _ in 0..5 {
            let posted = hanging
                .sender
                .post(&hanging.answering, "t=1,v1=x", vec![])
                .await
                .unwrap();
            assert_eq!(posted.answer, Ok(200));
        }
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(hanging.hits.load(Ordering::SeqCst), 6);

        // Its posts beyond the share wait while it may still answer; once it has gone a
        // second without, they are handed back.
        tokio::time::sleep(holds::SHARE_WAIT + Duration::from_millis(200)).await;
        hanging.release.send(true).unwrap();
        let mut handed_back = 0;
        for post in hanging.backlog {
            match post.await.unwrap() {
                Ok(posted) => assert_eq!(posted.answer, Ok(200)),
                Err(held) => {
                    assert!(held.retry_in >= holds::SHARE_WAIT, "{held:?}");
                    handed_back += 1;
                }
            }
        }
        assert_eq!(hanging.most.load(Ordering::SeqCst), holds::SHARE);
        assert_eq!(handed_back, MAX_OPEN_POSTS + 5 - holds::SHARE);
    }

    /// A receiver that answers, slowly, with its share of places open: its other posts wait
    /// for its places instead of being handed back (and read again later).
    #[tokio::test]
    async fn a_slow_receiver_at_its_share_has_its_next_posts_wait_for_its_places() {
        use std::sync::atomic::Ordering;
        let slow = backlog_at_share(MAX_OPEN_POSTS + 20).await;
        // It answers within the second its posts beyond the share wait.
        tokio::time::sleep(holds::SHARE_WAIT / 2).await;
        slow.release.send(true).unwrap();
        for post in slow.backlog {
            let posted = post.await.unwrap().expect("not handed back");
            assert_eq!(posted.answer, Ok(200));
        }
        assert_eq!(slow.most.load(Ordering::SeqCst), holds::SHARE);
    }

    /// After a post times out, a receiver keeps two places (its probes) and the rest of its
    /// posts are handed back at once instead of waiting out the timeout in a place; another
    /// receiver is not held back, and the first gets every place again once a probe answers.
    #[tokio::test]
    async fn a_receiver_that_stops_answering_is_held_to_its_probes_until_one_answers() {
        use std::sync::atomic::Ordering;
        let (release, released) = tokio::sync::watch::channel(false);
        let (hanging_port, open, _) = holding_receiver(released).await;
        let (answering_port, hits) = receiver().await;
        let timeout = Duration::from_millis(300);
        let sender = Arc::new(HttpWebhookSender::new(TargetPolicy { allow_local: true }, timeout));
        let hanging = format!("http://127.0.0.1:{hanging_port}/");
        let post_all = |url: String, count: usize| {
            let sender = sender.clone();
            async move {
                let mut outcomes = vec![];
                for post in spawn_posts(&sender, &url, count) {
                    outcomes.push(post.await.unwrap());
                }
                outcomes
            }
        };
        let first = post_all(hanging.clone(), 3).await;
        assert!(
            first.iter().all(|posted| posted.as_ref().unwrap().answer.is_err()),
            "{first:?}"
        );

        let probing = tokio::spawn(post_all(hanging.clone(), 5));
        while open.load(Ordering::SeqCst) < 3 + holds::HELD_PLACES && !probing.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let answered = post_all(format!("http://127.0.0.1:{answering_port}/"), 5).await;
        assert!(answered.iter().all(|posted| posted.as_ref().unwrap().answer == Ok(200)));
        assert_eq!(hits.load(Ordering::SeqCst), 5, "another receiver is not held back");
        let probed = probing.await.unwrap();
        let handed_back: Vec<_> = probed.iter().filter_map(|posted| posted.as_ref().err()).collect();
        assert_eq!(handed_back.len(), 5 - holds::HELD_PLACES, "{probed:?}");
        assert!(
            handed_back.iter().all(|held| held.retry_in >= Duration::from_secs(59)),
            "{handed_back:?}"
        );
        assert_eq!(
            open.load(Ordering::SeqCst),
            3 + holds::HELD_PLACES,
            "only the probes reached it"
        );

        // The receiver answers again: its next probe ends the hold.
        release.send(true).unwrap();
        assert!(post_all(hanging.clone(), 1).await[0].as_ref().unwrap().answer == Ok(200));
        let after = post_all(hanging, 5).await;
        assert!(
            after.iter().all(|posted| posted.as_ref().unwrap().answer == Ok(200)),
            "{after:?}"
        );
    }
}
