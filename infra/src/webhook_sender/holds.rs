//! Receivers held back: a receiver that stopped answering keeps few of the process's places.
//!
//! A post to a receiver that hangs keeps its place until the delivery timeout, and one that
//! refuses connections fails at once but says the same: nobody is there. Without a hold, such
//! a receiver's backlog could take every place a process has and starve every other
//! customer's deliveries for as long as it lasts. After a post to a receiver (its URL's
//! origin) times out or cannot connect, the receiver is held back: at most [`HELD_PLACES`]
//! posts to it are open at once (probes: any answer, even a 500, ends the hold), and the
//! rest are handed back to be sent later, no attempt counted. A hold lasts [`HOLD`] after
//! the receiver's last stall, so a receiver that stays dead stays held while its probes fail.
//!
//! A receiver is held only once a post to it has timed out, and a hanging receiver's backlog
//! could fill every place before the first one does. So while a process posts to more than
//! one receiver (any two within a [`HOLD`]), one receiver keeps at most [`SHARE`] places and
//! the rest are kept for the others. A post beyond its receiver's share waits for one of the
//! receiver's own posts to end, as long as the receiver answers: once it has gone
//! [`SHARE_WAIT`] without an answer, its posts beyond the share are handed back too, to wait
//! about as long as it has gone. A process posting to one receiver alone lets it have every
//! place.
//!
//! The state is the process's own: a function in the cloud learns it from its own posts.

use super::MAX_OPEN_POSTS;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

/// Posts a held-back receiver may have open at once: its probes.
pub const HELD_PLACES: usize = 2;
/// How long after its last stall a receiver is held back.
pub const HOLD: Duration = Duration::from_secs(60);
/// The longest a post handed back waits: the longest a queue holds a message back.
pub const LONGEST_WAIT: Duration = Duration::from_secs(ops_domain::ports::MAX_QUEUE_DELAY.whole_seconds() as u64);
/// Places one receiver may keep while the process posts to others too.
pub const SHARE: usize = MAX_OPEN_POSTS - MAX_OPEN_POSTS / 5;
/// How long a receiver with its share of places open may go without an answer before its
/// posts beyond the share are handed back rather than waiting; the least those wait.
pub const SHARE_WAIT: Duration = Duration::from_secs(1);

/// What one receiver is doing: its posts open now, its last answer, and its hold, if it has one.
#[derive(Debug)]
struct Receiver {
    open: usize,
    /// Its last answer, or when it was first posted to since it was last forgotten.
    answered: Instant,
    /// The first stall of the hold (how long the receiver has been gone) and when it ends.
    held: Option<(Instant, Instant)>,
    /// Told when one of its posts ends: a post waiting beyond its share may take the place.
    ended: Arc<Notify>,
}

impl Receiver {
    fn held_at(&self, now: Instant) -> Option<(Instant, Instant)> {
        self.held.filter(|(_, until)| *until > now)
    }
}

/// Every receiver this process posts to, by origin.
#[derive(Debug, Default)]
pub struct Holds {
    receivers: Mutex<Receivers>,
}

#[derive(Debug, Default)]
struct Receivers {
    by_origin: HashMap<String, Receiver>,
    /// The origin last admitted, and when: a post to another within a hold makes it shared.
    last: Option<(String, Instant)>,
    /// Until when the process's places are shared between its receivers.
    shared_until: Option<Instant>,
}

/// Why a post was not admitted.
#[derive(Debug)]
pub enum Refused {
    /// Handed back: to be tried again after this long.
    HandedBack(Duration),
    /// Its receiver has its share of places open and is answering: wait for one of them to
    /// end (`ended`), no later than `until`, then ask again.
    AtShare { ended: OwnedNotified, until: Instant },
}

/// A post admitted to its receiver, counted open until it is finished (or dropped unfinished).
pub struct Admitted<'a> {
    holds: &'a Holds,
    origin: &'a str,
    finished: bool,
}

impl Holds {
    /// Admits a post to `origin`, or says why not. A held receiver's post is handed back until
    /// the hold would end, and no sooner than the receiver has been gone (a receiver gone for
    /// an hour is asked about less often than one gone for a minute); one past its share waits
    /// for a place of its own, or is handed back for as long as it has gone without answering.
    pub fn admit<'a>(&'a self, origin: &'a str, now: Instant) -> Result<Admitted<'a>, Refused> {
        let mut receivers = self.receivers.lock().expect("the holds' lock is never poisoned");
        let Receivers {
            by_origin,
            last,
            shared_until,
        } = &mut *receivers;
        match last {
            Some((last, at)) if last == origin => *at = now,
            _ => {
                if last.as_ref().is_some_and(|(_, at)| now < *at + HOLD) {
                    *shared_until = Some(now + HOLD);
                }
                *last = Some((origin.to_owned(), now));
            }
        }
        // Looked up before it is inserted: a receiver posted to is mostly known already.
        let receiver = match by_origin.get_mut(origin) {
            Some(receiver) => receiver,
            None => by_origin.entry(origin.to_owned()).or_insert(Receiver {
                open: 0,
                answered: now,
                held: None,
                ended: Arc::default(),
            }),
        };
        if let Some((since, until)) = receiver.held_at(now) {
            if receiver.open >= HELD_PLACES {
                return Err(Refused::HandedBack((until - now).max(now - since).min(LONGEST_WAIT)));
            }
        }
        if receiver.open >= SHARE && shared_until.is_some_and(|until| now < until) {
            let silent = now - receiver.answered;
            if silent >= SHARE_WAIT {
                return Err(Refused::HandedBack(silent.min(LONGEST_WAIT)));
            }
            return Err(Refused::AtShare {
                ended: receiver.ended.clone().notified_owned(),
                until: receiver.answered + SHARE_WAIT,
            });
        }
        receiver.open += 1;
        Ok(Admitted {
            holds: self,
            origin,
            finished: false,
        })
    }

    /// A post ended: `stalled` (timed out, or could not connect) holds its receiver back, an
    /// answer ends its hold, and `None` (the post was dropped unfinished) leaves it as it is.
    fn end(&self, origin: &str, stalled: Option<bool>, now: Instant) {
        let mut receivers = self.receivers.lock().expect("the holds' lock is never poisoned");
        let receivers = &mut receivers.by_origin;
        let Some(receiver) = receivers.get_mut(origin) else {
            return;
        };
        receiver.open = receiver.open.saturating_sub(1);
        receiver.ended.notify_waiters();
        match stalled {
            Some(true) => {
                let since = receiver.held_at(now).map(|(since, _)| since).unwrap_or_else(|| {
                    tracing::warn!(%origin, "a webhook receiver stopped answering; its deliveries are held back until it answers again");
                    now
                });
                receiver.held = Some((since, now + HOLD));
            }
            Some(false) => {
                receiver.held = None;
                receiver.answered = now;
            }
            None => {}
        }
        if receiver.open == 0 && receiver.held_at(now).is_none() {
            // Nothing to remember: a process posting to many receivers keeps no trace of them.
            receivers.remove(origin);
        }
    }
}

impl Admitted<'_> {
    /// The post ended: `stalled` if its receiver timed out or could not be reached.
    pub fn finish(mut self, stalled: bool, now: Instant) {
        self.finished = true;
        self.holds.end(self.origin, Some(stalled), now)
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.holds.end(self.origin, None, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "https://hooks.example.com";

    /// How long a post is handed back for; `None` if it was admitted or waits at its share.
    fn handed_back(admitted: Result<Admitted<'_>, Refused>) -> Option<Duration> {
        match admitted {
            Err(Refused::HandedBack(wait)) => Some(wait),
            _ => None,
        }
    }

    #[test]
    fn a_receiver_that_answers_takes_every_place_it_asks_for() {
        let (holds, now) = (Holds::default(), Instant::now());
        let mut open: Vec<_> = (0..100).map(|_| holds.admit(ORIGIN, now).expect("admitted")).collect();
        // A 500 is an answer: the receiver is there.
        open.pop().unwrap().finish(false, now);
        assert!(holds.admit(ORIGIN, now).is_ok());
    }

    #[test]
    fn after_a_stall_a_receiver_keeps_only_its_probes_until_it_answers() {
        let (holds, now) = (Holds::default(), Instant::now());
        let mut open: Vec<_> = (0..3).map(|_| holds.admit(ORIGIN, now).expect("admitted")).collect();
        open.pop().unwrap().finish(true, now);
        // Two posts are still open: a third waits for the hold to end.
        assert_eq!(handed_back(holds.admit(ORIGIN, now)), Some(HOLD));
        assert!(
            holds.admit("https://other.example.com", now).is_ok(),
            "others are not held"
        );
        // A stall while held extends the hold.
        open.pop().unwrap().finish(true, now);
        // One probe open: another may go, and no more.
        open.push(holds.admit(ORIGIN, now).expect("a second probe"));
        assert!(holds.admit(ORIGIN, now).is_err());
        // A probe dropped unfinished frees its place and leaves the hold as it is.
        open.pop();
        open.push(holds.admit(ORIGIN, now).expect("a probe in its place"));
        assert!(holds.admit(ORIGIN, now).is_err());
        // A probe answers: the hold ends, and every place is the receiver's again.
        open.pop().unwrap().finish(false, now);
        open.extend((0..10).map(|_| holds.admit(ORIGIN, now).expect("admitted")));
    }

    #[test]
    fn a_hold_lasts_from_the_last_stall_and_the_wait_grows_with_the_receivers_absence() {
        let (holds, start) = (Holds::default(), Instant::now());
        let mut open: Vec<_> = (0..HELD_PLACES + 1)
            .map(|_| holds.admit(ORIGIN, start).unwrap())
            .collect();
        open.pop().unwrap().finish(true, start);
        // Probes keep failing for an hour, each renewing the hold and making way for the next.
        let mut now = start;
        while now < start + Duration::from_secs(3600) {
            now += Duration::from_secs(30);
            open.pop().unwrap().finish(true, now);
            open.push(holds.admit(ORIGIN, now).expect("a probe"));
        }
        assert_eq!(
            handed_back(holds.admit(ORIGIN, now)),
            Some(LONGEST_WAIT),
            "gone an hour: asked again in fifteen minutes, not in one"
        );
        // No stall for a whole hold: the receiver may have every place again.
        let quiet = now + HOLD;
        open.extend((0..10).map(|_| holds.admit(ORIGIN, quiet).expect("admitted")));
    }

    #[test]
    fn while_others_are_posted_to_a_receiver_keeps_its_share_and_no_more() {
        let (holds, start) = (Holds::default(), Instant::now());
        let other = "https://other.example.com";
        holds.admit(other, start).unwrap().finish(false, start);
        // Within a hold of the other's post: this receiver's share, and no more.
        let mut now = start + HOLD - Duration::from_secs(1);
        let mut open: Vec<_> = (0..SHARE)
            .map(|_| holds.admit(ORIGIN, now).expect("its share"))
            .collect();
        // It has just been posted to (as good as an answer): the next post waits for a place.
        let Err(Refused::AtShare { until, .. }) = holds.admit(ORIGIN, now) else {
            panic!("a post beyond the share of a receiver that answers waits for its place")
        };
        assert_eq!(until, now + SHARE_WAIT);
        let reserved: Vec<_> = (SHARE..MAX_OPEN_POSTS)
            .map(|_| holds.admit(other, now).expect("the places kept for others"))
            .collect();
        // An answer frees a place, and a post takes it.
        now += Duration::from_millis(500);
        open.pop().unwrap().finish(false, now);
        open.push(holds.admit(ORIGIN, now).expect("the place freed"));
        assert!(matches!(holds.admit(ORIGIN, now), Err(Refused::AtShare { .. })));
        // Ten seconds without an answer: posts beyond the share are handed back for ten.
        now += Duration::from_secs(10);
        assert_eq!(handed_back(holds.admit(ORIGIN, now)), Some(Duration::from_secs(10)));
        drop(reserved);
        // Shared for a hold after the last post to another: then every place is this one's.
        now += HOLD;
        open.extend((0..MAX_OPEN_POSTS).map(|_| holds.admit(ORIGIN, now).expect("alone again")));
    }

    #[tokio::test]
    async fn a_post_waiting_at_its_share_is_told_when_its_receiver_has_a_place_again() {
        let (holds, now) = (Holds::default(), Instant::now());
        holds
            .admit("https://other.example.com", now)
            .unwrap()
            .finish(false, now);
        let mut open: Vec<_> = (0..SHARE).map(|_| holds.admit(ORIGIN, now).unwrap()).collect();
        let Err(Refused::AtShare { ended, .. }) = holds.admit(ORIGIN, now) else {
            panic!("waits at its share")
        };
        open.pop().unwrap().finish(false, now);
        tokio::time::timeout(std::time::Duration::from_secs(1), ended)
            .await
            .expect("told at once");
        assert!(holds.admit(ORIGIN, now).is_ok());
    }

    #[test]
    fn receivers_not_held_and_not_posted_to_are_forgotten() {
        let (holds, now) = (Holds::default(), Instant::now());
        holds.admit(ORIGIN, now).unwrap().finish(false, now);
        holds.admit("https://gone.example.com", now).unwrap().finish(true, now);
        let receivers = holds.receivers.lock().unwrap();
        assert_eq!(
            receivers.by_origin.keys().collect::<Vec<_>>(),
            ["https://gone.example.com"]
        );
    }
}
