//! The inbox on every driver here, with real worker runtimes: broadcast, ask from the main
//! thread, ask from a worker, close, and shutdown with messages still queued.

use super::*;
use crate::runtime::{
    drivers_here, spawn_workers, DriverChoice, DriverKind, RuntimeConfig, Workers,
};
use crate::shutdown::ShutdownFlag;
use std::sync::mpsc as std_mpsc;

enum Msg {
    Purge(&'static str),
    Count(Reply<usize>),
    /// Worker `from` asks everyone for its purge count; answers come back as `Answer`.
    Gather {
        from: usize,
        done: std_mpsc::Sender<Vec<(usize, usize)>>,
    },
    Answer {
        id: usize,
        purged: usize,
    },
    /// Worker `from` wants everyone's answer; held by the asker until all are in.
    Ask {
        from: usize,
    },
}

fn cfg(n: usize) -> RuntimeConfig {
    RuntimeConfig {
        workers: n,
        pin: false,
        pin_forced: false,
        driver: DriverChoice::Auto,
        entries: 256,
        multishot: true,
    }
}

/// Workers that serve `Msg` until their inbox closes, then end.
fn serve(driver: DriverKind, post: &Post<Msg>, flag: Arc<ShutdownFlag>) -> Workers {
    let n = post.workers();
    let post = post.clone();
    spawn_workers(
        &cfg(n),
        driver,
        flag,
        "inbox",
        vec![(); n],
        move |ctx, ()| {
            let post = post.clone();
            async move {
                let mut inbox = post.inbox(ctx.id).expect("inbox");
                let mut purged = 0usize;
                let mut gathering: Option<(Vec<(usize, usize)>, std_mpsc::Sender<_>)> = None;
                while let Some(m) = inbox.recv().await {
                    match m {
                        Msg::Purge(key) => {
                            assert!(key.starts_with('/'));
                            purged += 1;
                        }
                        Msg::Count(r) => r.send(purged),
                        Msg::Gather { from, done } => {
                            gathering = Some((Vec::new(), done));
                            assert_eq!(inbox.post().broadcast(|_| Msg::Ask { from }), n);
                        }
                        Msg::Ask { from } => {
                            let a = Msg::Answer { id: ctx.id, purged };
                            assert!(inbox.post().send(from, a).is_ok());
                        }
                        Msg::Answer { id, purged } => {
                            let (got, _) = gathering.as_mut().expect("asked first");
                            got.push((id, purged));
                            if got.len() == n {
                                let (mut got, done) = gathering.take().expect("asked first");
                                got.sort();
                                done.send(got).expect("test waits");
                            }
                        }
                    }
                }
            }
        },
    )
    .expect("workers start")
}

#[test]
fn broadcast_then_ask_every_worker_in_order() {
    for driver in drivers_here() {
        let post: Post<Msg> = Post::new(3).unwrap();
        // Messages sent before the workers start wait in their queues.
        assert_eq!(post.broadcast(|_| Msg::Purge("/a")), 3);
        let workers = serve(driver, &post, ShutdownFlag::new());
        for _ in 0..4 {
            assert_eq!(post.broadcast(|_| Msg::Purge("/b")), 3);
        }
        assert!(post.send(1, Msg::Purge("/c")).is_ok());
        // Each queue is FIFO: the counts include every purge sent before the ask.
        let counts = post
            .ask_all(|_, r| Msg::Count(r), Duration::from_secs(30))
            .unwrap();
        assert_eq!(counts, [5, 6, 5], "{driver}");
        // A burst, then an ask: nothing lost, nothing doubled.
        for i in 0..1000 {
            assert!(post.send(i % 3, Msg::Purge("/d")).is_ok());
        }
        let counts = post
            .ask_all(|_, r| Msg::Count(r), Duration::from_secs(30))
            .unwrap();
        assert_eq!(counts, [339, 339, 338], "{driver}");
        post.close_all();
        workers.join().unwrap();
        assert!(matches!(
            post.send(0, Msg::Purge("/x")),
            Err(SendError::Closed(_))
        ));
    }
}

#[test]
fn a_worker_asks_every_worker_and_gets_every_answer() {
    for driver in drivers_here() {
        let post: Post<Msg> = Post::new(2).unwrap();
        let workers = serve(driver, &post, ShutdownFlag::new());
        assert!(post.send(1, Msg::Purge("/a")).is_ok());
        let (tx, rx) = std_mpsc::channel();
        assert!(post.send(0, Msg::Gather { from: 0, done: tx }).is_ok());
        let got = rx.recv_timeout(Duration::from_secs(30)).expect("gathered");
        assert_eq!(got, [(0, 0), (1, 1)], "{driver}");
        post.close_all();
        workers.join().unwrap();
    }
}

#[test]
fn shutdown_with_messages_pending_answers_gone_not_timeout() {
    for driver in drivers_here() {
        let post: Post<Msg> = Post::new(2).unwrap();
        let flag = ShutdownFlag::new();
        let p = post.clone();
        // Worker 0 serves its inbox; worker 1 holds its inbox unread until shutdown.
        let workers = spawn_workers(
            &cfg(2),
            driver,
            flag.clone(),
            "inbox",
            vec![(); 2],
            move |ctx, ()| {
                let post = p.clone();
                async move {
                    let mut inbox = post.inbox(ctx.id).expect("inbox");
                    if ctx.id == 1 {
                        ctx.shutdown.wait().await;
                        return;
                    }
                    let stop = ctx.shutdown.clone();
                    let serve = async {
                        while let Some(m) = inbox.recv().await {
                            if let Msg::Count(r) = m {
                                r.send(7);
                            }
                        }
                    };
                    monoio::select! {
                        _ = serve => {}
                        _ = stop.wait() => {}
                    }
                }
            },
        )
        .unwrap();
        let p = post.clone();
        let asker = std::thread::spawn(move || {
            let t = Instant::now();
            let r = p.ask_all(|_, r| Msg::Count(r), Duration::from_secs(60));
            (r, t.elapsed())
        });
        // The ask is queued at worker 1 (a counter, checked until it moves).
        let deadline = Instant::now() + Duration::from_secs(30);
        while post.pending(1) == 0 {
            assert!(Instant::now() < deadline, "the ask never reached worker 1");
            std::thread::yield_now();
        }
        flag.trigger();
        workers.join().unwrap();
        let (r, took) = asker.join().unwrap();
        assert_eq!(r, Err(AskError::Gone(vec![1])), "{driver}");
        assert!(
            took < Duration::from_secs(60),
            "answered by the drop, not the deadline"
        );
        assert_eq!(post.pending(1), 0, "the dropped inbox dropped its queue");
        for id in 0..2 {
            assert!(matches!(
                post.send(id, Msg::Purge("/x")),
                Err(SendError::Closed(_))
            ));
        }
    }
}

#[test]
fn ask_times_out_naming_the_silent_worker() {
    let post: Post<Msg> = Post::new(2).unwrap();
    // No worker runs: nobody answers, both messages stay queued.
    let r = post.ask_all(|_, r| Msg::Count(r), Duration::from_millis(50));
    assert_eq!(r, Err(AskError::Timeout(vec![0, 1])));
    assert_eq!((post.pending(0), post.pending(1)), (1, 1));
    assert!(matches!(
        post.send(2, Msg::Purge("/")),
        Err(SendError::NoSuchWorker(_))
    ));
    assert!(post.inbox(2).is_err());
    post.close_all();
    assert_eq!(post.pending(0), 0);
    let r = post.ask_all(|_, r| Msg::Count(r), Duration::from_secs(30));
    assert_eq!(
        r,
        Err(AskError::Gone(vec![0, 1])),
        "closed inboxes answer at once"
    );
    let r = post.ask_each(|_, r| Msg::Count(r), Duration::from_secs(30));
    assert_eq!(
        r,
        Ok(vec![None, None]),
        "ask_each leaves the gone to the asker"
    );
}

#[test]
fn an_inbox_is_taken_once() {
    for driver in drivers_here() {
        let post: Post<Msg> = Post::new(1).unwrap();
        crate::runtime::run_on(driver, 64, async {
            let first = post.inbox(0).unwrap();
            let again = post.inbox(0).map(|_| ()).unwrap_err();
            assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
            drop(first);
        })
        .unwrap();
    }
}
