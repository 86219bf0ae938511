//! Shutdown: SIGINT/SIGTERM/SIGQUIT set a process-wide flag; each worker watches it and wakes
//! its own tasks through a worker-local [`Shutdown`] handle. A process that reloads its config
//! takes SIGHUP on the same signal thread ([`install_signal_handlers`]), and SIGUSR1 and
//! SIGUSR2 are taken there too (their default action kills).
//!
//! Signals are blocked in every thread before the workers start (so no worker's io_uring wait
//! is interrupted) and taken by one `sigwait` thread. Workers poll the flag on a coarse tick
//! (every 50 ms): nothing crosses threads on the request path, and no cross-thread waker is
//! needed.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The process-wide flag: set once by a signal or by `trigger`, read by the workers.
#[derive(Debug, Default)]
pub struct ShutdownFlag {
    fired: AtomicBool,
}

impl ShutdownFlag {
    pub fn new() -> Arc<Self> {
        Arc::new(ShutdownFlag::default())
    }

    pub fn trigger(&self) {
        self.fired.store(true, Ordering::Release);
    }

    pub fn is_set(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

/// Block the stop signals (SIGINT, SIGTERM and SIGQUIT, nginx's graceful stop) in this thread
/// (and so in every thread it spawns afterwards) and start a thread that waits for them and
/// sets `flag`. Call before starting the workers. `on_signal` runs on the signal thread after
/// each signal, with the count so far. SIGUSR1 and SIGUSR2 are taken and do nothing.
pub fn install_signal_handler(
    flag: Arc<ShutdownFlag>,
    on_signal: impl Fn(usize) + Send + 'static,
) -> std::io::Result<()> {
    install_signal_handlers(flag, on_signal, Actions::default())
}

/// What SIGHUP does in a process that handles it: runs on the signal thread, one at a time.
pub type OnReload = Box<dyn FnMut() + Send>;

/// What the signal thread does with the signals that do not stop the process.
pub struct Actions {
    /// SIGHUP, when the process reloads (else SIGHUP is left to its default action).
    pub on_reload: Option<OnReload>,
    /// SIGUSR1: the proxy reopens its access logs.
    pub on_reopen: Box<dyn Fn() + Send>,
    /// SIGUSR2 (nginx's binary upgrade): taken here, so that it never kills the process.
    pub on_usr2: Box<dyn Fn() + Send>,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            on_reload: None,
            on_reopen: Box::new(|| {}),
            on_usr2: Box::new(|| {}),
        }
    }
}

/// [`install_signal_handler`], with `actions`: with `on_reload` SIGHUP too, blocked like the
/// stop signals (its default action would kill the process) and handed to `on_reload` on the
/// signal thread. A stop signal that arrives during a reload is taken once the reload returns.
/// SIGUSR1 and SIGUSR2 (blocked with the stop signals, so no worker takes them) run
/// `on_reopen` and `on_usr2` on the signal thread.
pub fn install_signal_handlers(
    flag: Arc<ShutdownFlag>,
    on_signal: impl Fn(usize) + Send + 'static,
    actions: Actions,
) -> std::io::Result<()> {
    let Actions {
        mut on_reload,
        on_reopen,
        on_usr2,
    } = actions;
    let reload = on_reload.is_some();
    // Blocked for good in this thread: the `signals` thread below takes them with sigwait.
    SignalMask::block(reload)?.keep();
    let set = handled_signals(reload);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            // Its lines (a reload's) go through the log writer: a write to a full stderr
            // pipe would block the one thread that takes SIGTERM.
            crate::log::defer_on_this_thread();
            let mut n = 0usize;
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is a valid, initialised signal set; `sig` is a valid out
                // pointer.
                let rc = unsafe { libc::sigwait(&set, &mut sig) };
                if rc != 0 {
                    continue;
                }
                if sig == libc::SIGUSR1 {
                    on_reopen();
                    continue;
                }
                if sig == libc::SIGUSR2 {
                    on_usr2();
                    continue;
                }
                if sig == libc::SIGHUP {
                    if let Some(f) = on_reload.as_mut() {
                        f();
                    }
                    continue;
                }
                n += 1;
                flag.trigger();
                on_signal(n);
            }
        })?;
    Ok(())
}

/// SIGINT, SIGTERM and SIGQUIT, the signals that stop the process; SIGUSR1 (reopen the logs)
/// and SIGUSR2; and SIGHUP (reload) if `reload`.
fn handled_signals(reload: bool) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before sigaddset uses it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGQUIT);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        if reload {
            libc::sigaddset(&mut set, libc::SIGHUP);
        }
        set
    }
}

/// The stop signals, SIGUSR1 and SIGUSR2 (and SIGHUP where reloads are handled) blocked in this thread while
/// the guard lives (the old mask comes back on drop). Threads spawned meanwhile inherit the
/// mask: that is how worker threads are kept from taking a signal meant for the one
/// `sigwait` thread.
pub struct SignalMask {
    old: libc::sigset_t,
}

impl SignalMask {
    pub fn block_stop_signals() -> std::io::Result<SignalMask> {
        Self::block(false)
    }

    /// SIGHUP blocked too: for a process whose signal thread handles reloads (a worker
    /// thread that left it unblocked would take it, and its default action kills).
    pub fn block_stop_and_reload_signals() -> std::io::Result<SignalMask> {
        Self::block(true)
    }

    fn block(reload: bool) -> std::io::Result<SignalMask> {
        let set = handled_signals(reload);
        // SAFETY: `set` is initialised; `old` is a valid out pointer that pthread_sigmask fills.
        let (rc, old) = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            (rc, old)
        };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(SignalMask { old })
    }

    /// Leave the signals blocked in this thread for good.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for SignalMask {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `block_stop_signals`, an initialised sigset_t.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// A worker's local view of shutdown: cheap to clone, awaitable by any task of the worker.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Rc<Inner>,
}

/// Waiters have a slot each, so a dropped `Wait` (a connection that ended) frees its waker:
/// the table holds only live waiters, however many connections come and go. A slot index,
/// not a hashed key: a connection's `Wait` is polled on every wake-up of its task.
#[derive(Default)]
struct Inner {
    fired: Cell<bool>,
    wakers: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Slots {
    fn insert(&mut self, w: Waker) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.wakers[i] = Some(w);
                i
            }
            None => {
                self.wakers.push(Some(w));
                self.wakers.len() - 1
            }
        }
    }

    fn remove(&mut self, i: usize) {
        // After `fire` the table is empty: a stale index is ignored.
        if let Some(slot) = self.wakers.get_mut(i) {
            *slot = None;
            self.free.push(i);
        }
    }

    /// Give back the room of free slots at the end of the table: it keeps the size of the
    /// most waiters ever live (one per connection of a crowd) until then. Live slots keep
    /// their index.
    fn shrink(&mut self) {
        while self.wakers.last().is_some_and(Option::is_none) {
            self.wakers.pop();
        }
        let len = self.wakers.len();
        self.free.retain(|&i| i < len);
        self.wakers.shrink_to_fit();
        self.free.shrink_to_fit();
    }
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_fired(&self) -> bool {
        self.inner.fired.get()
    }

    /// Fire: every pending and future `wait()` completes.
    pub fn fire(&self) {
        if self.inner.fired.replace(true) {
            return;
        }
        let slots = std::mem::take(&mut *self.inner.wakers.borrow_mut());
        for w in slots.wakers.into_iter().flatten() {
            w.wake();
        }
    }

    /// Give back the waiter table's room beyond its last live waiter (after a crowd of
    /// connections left: the table grew to one slot per connection).
    pub fn shrink(&self) {
        self.inner.wakers.borrow_mut().shrink();
    }

    /// Completes once `fire` has been called.
    pub fn wait(&self) -> Wait {
        Wait {
            inner: self.inner.clone(),
            slot: None,
        }
    }

    /// Watch a process-wide flag and fire when it is set. Spawn this on the worker's runtime
    /// (it needs the timer); it ends when the flag is set or this handle fires.
    pub async fn watch(self, flag: Arc<ShutdownFlag>) {
        while !flag.is_set() && !self.is_fired() {
            monoio::time::sleep(Duration::from_millis(50)).await;
        }
        self.fire();
    }
}

/// Future returned by [`Shutdown::wait`].
pub struct Wait {
    inner: Rc<Inner>,
    /// Its waker's slot, once polled.
    slot: Option<usize>,
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            self.inner.wakers.borrow_mut().remove(i);
        }
    }
}

impl Future for Wait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.fired.get() {
            return Poll::Ready(());
        }
        let this = &mut *self;
        let mut slots = this.inner.wakers.borrow_mut();
        match this.slot {
            Some(i) => match &mut slots.wakers[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            None => this.slot = Some(slots.insert(cx.waker().clone())),
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked_now(sig: libc::c_int) -> bool {
        // SAFETY: a null new set only reads this thread's mask into `cur`, a valid out pointer.
        unsafe {
            let mut cur: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
            libc::sigismember(&cur, sig) == 1
        }
    }

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    /// A waker that counts its wake-ups.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn waiters_free_their_slots_and_all_wake_on_fire() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let s = Shutdown::new();
        // Connections come and go: the table never holds more than the live ones.
        for _ in 0..100 {
            let mut w = s.wait();
            assert!(Pin::new(&mut w).poll(&mut cx).is_pending());
            assert!(Pin::new(&mut w).poll(&mut cx).is_pending());
        }
        assert_eq!(s.inner.wakers.borrow().wakers.len(), 1);
        let mut live: Vec<Wait> = (0..3).map(|_| s.wait()).collect();
        for w in &mut live {
            assert!(Pin::new(w).poll(&mut cx).is_pending());
        }
        drop(live.remove(1));
        s.fire();
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        for w in &mut live {
            assert!(Pin::new(w).poll(&mut cx).is_ready());
        }
        // Dropped after the fire emptied the table: nothing to free, no panic.
        drop(live);
        assert!(Pin::new(&mut s.wait()).poll(&mut cx).is_ready());
    }

    #[test]
    fn a_crowds_room_is_given_back_and_live_waiters_keep_their_slots() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let s = Shutdown::new();
        let mut first = s.wait();
        assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
        let mut crowd: Vec<Wait> = (0..1000).map(|_| s.wait()).collect();
        for w in &mut crowd {
            assert!(Pin::new(w).poll(&mut cx).is_pending());
        }
        let mut last = crowd.pop().unwrap();
        drop(crowd);
        s.shrink();
        // The last crowd member is still live: nothing after it, nothing before it given up.
        assert_eq!(s.inner.wakers.borrow().wakers.len(), 1001);
        drop(last);
        s.shrink();
        let slots = s.inner.wakers.borrow();
        assert_eq!((slots.wakers.len(), slots.free.len()), (1, 0));
        assert!(slots.wakers.capacity() < 16, "{}", slots.wakers.capacity());
        drop(slots);
        // New waiters take slots again, and firing wakes the live ones.
        let mut next = s.wait();
        assert!(Pin::new(&mut next).poll(&mut cx).is_pending());
        s.fire();
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        assert!(Pin::new(&mut first).poll(&mut cx).is_ready());
        last = s.wait();
        assert!(Pin::new(&mut last).poll(&mut cx).is_ready());
    }

    #[test]
    fn signal_mask_blocks_while_alive_and_restores() {
        // A thread of its own: the test harness's threads are not ours to change.
        std::thread::spawn(|| {
            assert!(!blocked_now(libc::SIGTERM));
            let mask = SignalMask::block_stop_signals().unwrap();
            assert!(blocked_now(libc::SIGINT) && blocked_now(libc::SIGTERM));
            // Threads spawned now inherit it.
            let child = std::thread::spawn(|| blocked_now(libc::SIGTERM));
            assert!(child.join().unwrap());
            drop(mask);
            assert!(!blocked_now(libc::SIGINT) && !blocked_now(libc::SIGTERM));
        })
        .join()
        .unwrap();
    }
}
