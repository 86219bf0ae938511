//! The workers' inbox: one way for any thread (the main thread, a worker) to hand a message
//! to one worker or to every worker — a purge on every worker, a metrics scrape that gathers
//! per-worker counters, health state, a reload.
//!
//! Design: per worker, a queue (`Mutex<VecDeque>`) and a wake-up socket. The sender pushes,
//! then writes one byte to the worker's socket only if no wake-up is pending (an atomic flag),
//! so a burst of messages costs one `write` and one wake. The worker's inbox task awaits a
//! read on the other end of the socket with its own runtime's driver — a plain socket read, so
//! it works the same on io_uring and on epoll — then clears the flag and drains the queue.
//! While no message is pending the worker has one parked read and nothing else: no timer, no
//! polling, nothing on the request path.
//!
//! Why a socketpair and not an eventfd or monoio's `sync` feature: monoio 0.2.4 (without its
//! `poll-io` feature) can only await readiness of sockets on its epoll driver — `File` is not
//! registered with epoll and `Pipe` has no read — so an eventfd could not be awaited on both
//! drivers; a Unix stream socket can, at the same cost (one syscall to wake, one to drain).
//! The `sync` feature makes every task's waker cross-thread capable (a thread check on every
//! wake, a flume channel and a thread pool linked in) to gain the same single wake-up: not
//! worth it on the request path. See `benches/benches/inbox.rs` for the round-trip cost.
//!
//! Request/response: a message may carry a [`Reply`]; [`Post::ask_all`] sends one request to
//! every worker and blocks the calling (non-worker) thread until every answer is in, a worker
//! is gone, or a deadline passes. A worker that asks does not block: it sends requests that
//! name it and receives the answers as messages in its own inbox.
//!
//! Shutdown: a closed inbox (its worker ended, or [`Post::close_all`]) drops the messages still
//! queued — dropping their `Reply`s, so an asker learns at once that those workers will not
//! answer — and refuses later sends with [`SendError::Closed`].

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A message could not be delivered: the worker's inbox is closed. The message comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError<M> {
    Closed(M),
    /// No worker with that index.
    NoSuchWorker(M),
}

/// Why [`Post::ask_all`] has fewer answers than workers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("workers {0:?} are gone and will not answer")]
    Gone(Vec<usize>),
    #[error("workers {0:?} did not answer in time")]
    Timeout(Vec<usize>),
}

struct Queue<M> {
    messages: VecDeque<M>,
    closed: bool,
}

struct Mailbox<M> {
    queue: Mutex<Queue<M>>,
    /// A wake-up byte is on its way and the worker has not yet drained: no need for another.
    notified: AtomicBool,
    wake: StdUnixStream,
    /// The worker's end, until its inbox takes it.
    reader: Mutex<Option<StdUnixStream>>,
}

impl<M> Mailbox<M> {
    fn lock(&self) -> MutexGuard<'_, Queue<M>> {
        // A panic while holding the lock cannot leave the queue half-changed (push and pop
        // are single calls): keep going with it.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn poke(&self) {
        if !self.notified.swap(true, Ordering::SeqCst) {
            // EAGAIN means the socket already holds unread bytes: the worker will wake anyway.
            let _ = (&self.wake).write(&[1]);
        }
    }

    fn close(&self) -> VecDeque<M> {
        let mut q = self.lock();
        q.closed = true;
        std::mem::take(&mut q.messages)
    }
}

/// The sending side, for every worker: cheap to clone, shared across threads.
pub struct Post<M> {
    boxes: Arc<[Mailbox<M>]>,
}

impl<M> Clone for Post<M> {
    fn clone(&self) -> Self {
        Post {
            boxes: self.boxes.clone(),
        }
    }
}

impl<M> Post<M> {
    /// Mailboxes for `workers` workers; each worker takes its [`Inbox`] with [`Post::inbox`].
    pub fn new(workers: usize) -> io::Result<Post<M>> {
        let mut boxes = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (wake, reader) = StdUnixStream::pair()?;
            wake.set_nonblocking(true)?;
            reader.set_nonblocking(true)?;
            boxes.push(Mailbox {
                queue: Mutex::new(Queue {
                    messages: VecDeque::new(),
                    closed: false,
                }),
                notified: AtomicBool::new(false),
                wake,
                reader: Mutex::new(Some(reader)),
            });
        }
        Ok(Post {
            boxes: boxes.into(),
        })
    }

    pub fn workers(&self) -> usize {
        self.boxes.len()
    }

    /// Worker `id`'s inbox, on that worker's runtime (its socket joins the runtime's driver).
    /// Taken once; a second call is an error.
    pub fn inbox(&self, id: usize) -> io::Result<Inbox<M>> {
        let mb = self
            .boxes
            .get(id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no worker {id}")))?;
        let reader = mb
            .reader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("the inbox of worker {id} is taken"),
                )
            })?;
        Ok(Inbox {
            post: self.clone(),
            id,
            reader: monoio::net::UnixStream::from_std(reader)?,
            buf: Some(vec![0; 64]),
        })
    }

    /// Queue `msg` for worker `to` and wake it.
    pub fn send(&self, to: usize, msg: M) -> Result<(), SendError<M>> {
        let Some(mb) = self.boxes.get(to) else {
            return Err(SendError::NoSuchWorker(msg));
        };
        {
            let mut q = mb.lock();
            if q.closed {
                return Err(SendError::Closed(msg));
            }
            q.messages.push_back(msg);
        }
        mb.poke();
        Ok(())
    }

    /// Send `make(id)` to every worker `id`; returns how many took it (closed ones did not).
    pub fn broadcast(&self, mut make: impl FnMut(usize) -> M) -> usize {
        (0..self.boxes.len())
            .filter(|&i| self.send(i, make(i)).is_ok())
            .count()
    }

    /// Messages queued for worker `id` (0 for an unknown worker).
    pub fn pending(&self, id: usize) -> usize {
        self.boxes.get(id).map_or(0, |mb| mb.lock().messages.len())
    }

    /// Close every inbox: queued messages are dropped, `recv` returns `None`, sends fail.
    pub fn close_all(&self) {
        for mb in self.boxes.iter() {
            drop(mb.close());
            mb.poke();
        }
    }

    /// Ask every worker: `make(id, reply)` builds worker `id`'s message, which answers through
    /// `reply`. Blocks the calling thread (never call it on a worker) until every worker has
    /// answered, or a worker is gone (its inbox closed or the message dropped unanswered), or
    /// `timeout` passes. Answers are in worker order.
    pub fn ask_all<R>(
        &self,
        make: impl Fn(usize, Reply<R>) -> M,
        timeout: Duration,
    ) -> Result<Vec<R>, AskError> {
        let answers = self.ask_each(make, timeout)?;
        let gone: Vec<usize> = (0..answers.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        if !gone.is_empty() {
            return Err(AskError::Gone(gone));
        }
        Ok(answers.into_iter().flatten().collect())
    }

    /// [`Post::ask_all`], where a worker that is gone is a `None` among the answers instead of
    /// an error, for an asker that can stand in for it. Only a worker still there and late is
    /// an error.
    pub fn ask_each<R>(
        &self,
        make: impl Fn(usize, Reply<R>) -> M,
        timeout: Duration,
    ) -> Result<Vec<Option<R>>, AskError> {
        let n = self.boxes.len();
        let (tx, rx) = mpsc::channel();
        let mut gone = Vec::new();
        for id in 0..n {
            let reply = Reply { id, tx: tx.clone() };
            if self.send(id, make(id, reply)).is_err() {
                gone.push(id);
            }
        }
        drop(tx);
        let mut answers: Vec<Option<R>> = (0..n).map(|_| None).collect();
        let deadline = Instant::now() + timeout;
        let mut missing = n - gone.len();
        while missing > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((id, r)) => {
                    if answers[id].replace(r).is_none() {
                        missing -= 1;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let late = (0..n).filter(|&i| answers[i].is_none() && !gone.contains(&i));
                    return Err(AskError::Timeout(late.collect()));
                }
            }
        }
        Ok(answers)
    }
}

/// The way back for one worker's answer to [`Post::ask_all`]. Dropping it unanswered tells
/// the asker this worker will not answer.
pub struct Reply<R> {
    id: usize,
    tx: mpsc::Sender<(usize, R)>,
}

impl<R> Reply<R> {
    /// The worker this reply is from.
    pub fn worker(&self) -> usize {
        self.id
    }

    pub fn send(self, answer: R) {
        // The asker may have given up (timeout): nothing to do then.
        let _ = self.tx.send((self.id, answer));
    }
}

impl<R> std::fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reply(worker {})", self.id)
    }
}

/// One worker's receiving side. Owned by the worker's inbox task.
pub struct Inbox<M> {
    post: Post<M>,
    id: usize,
    reader: monoio::net::UnixStream,
    buf: Option<Vec<u8>>,
}

impl<M> Inbox<M> {
    pub fn id(&self) -> usize {
        self.id
    }

    /// The sending side (to message other workers, or to answer an asking worker).
    pub fn post(&self) -> &Post<M> {
        &self.post
    }

    fn mailbox(&self) -> &Mailbox<M> {
        &self.post.boxes[self.id]
    }

    /// The next message, waiting for one if none is queued; `None` once the inbox is closed.
    pub async fn recv(&mut self) -> Option<M> {
        use monoio::io::AsyncReadRent;
        loop {
            {
                let mut q = self.mailbox().lock();
                if q.closed {
                    return None;
                }
                if let Some(m) = q.messages.pop_front() {
                    return Some(m);
                }
            }
            // Clear before the last look at the queue: a message pushed after this look
            // finds the flag clear and writes a byte, so it cannot be missed.
            self.mailbox().notified.store(false, Ordering::SeqCst);
            {
                let mut q = self.mailbox().lock();
                if q.closed {
                    return None;
                }
                if let Some(m) = q.messages.pop_front() {
                    return Some(m);
                }
            }
            let buf = self.buf.take().unwrap_or_else(|| vec![0; 64]);
            let (res, buf) = self.reader.read(buf).await;
            self.buf = Some(buf);
            match res {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The socket cannot fail while both ends live; if it did, the inbox is
                // unusable: treat it as closed rather than spin.
                Err(_) => {
                    drop(self.mailbox().close());
                    return None;
                }
            }
        }
    }

    /// Take every queued message without waiting (tests, and a worker's last look at
    /// shutdown).
    pub fn try_recv(&mut self) -> Option<M> {
        let mut q = self.mailbox().lock();
        if q.closed {
            return None;
        }
        q.messages.pop_front()
    }
}

impl<M> Drop for Inbox<M> {
    fn drop(&mut self) {
        // Pending messages (and their replies) are dropped outside the lock.
        drop(self.mailbox().close());
    }
}

#[cfg(test)]
mod tests;
