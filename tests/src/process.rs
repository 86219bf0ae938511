//! A spawned binary of ours (`proxy`, `loader`) as the process tests drive it.
//!
//! Its stderr is read line by line on a thread into a channel that lives as long as the
//! [`Process`]: a dropped reader would make the child's next write to stderr fail
//! (`eprintln!` then panics, and the child dies in the middle of the test). Every line
//! received, through any method, is kept for messages and for [`Process::finish`].
//! The child is killed on drop if it still runs, so a failing test leaves nothing behind.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Run `cmd` in an address space of `bytes` (RLIMIT_AS): an allocation beyond it fails, and
/// a process that would allocate without bound aborts instead of taking the machine's memory.
pub fn limit_address_space(cmd: &mut Command, bytes: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit only, between fork and exec: no allocation, no lock.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Patience for a start-up line on a loaded machine.
pub const READY: Duration = Duration::from_secs(20);

pub struct Process {
    child: Child,
    /// The program's name, for messages.
    name: String,
    lines: mpsc::Receiver<String>,
    /// Every stderr line received so far.
    seen: Vec<String>,
}

impl Process {
    /// Spawn `cmd` with stdin from /dev/null and stderr piped to the reader thread;
    /// stdout stays as `cmd` set it (take a pipe with [`Process::take_stdout`]).
    pub fn spawn(cmd: &mut Command) -> Process {
        let name = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let err = child.stderr.take().expect("stderr piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).split(b'\n') {
                // A read error on the pipe is reported as a line, not swallowed.
                let line = line
                    .map(|l| String::from_utf8_lossy(&l).into_owned())
                    .unwrap_or_else(|e| format!("<reading stderr failed: {e}>"));
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Process {
            child,
            name,
            lines,
            seen: Vec::new(),
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The stdout pipe, when `cmd` asked for one (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The next stderr line, waiting up to `wait`; `None` if none came (or stderr ended).
    pub fn next_line(&mut self, wait: Duration) -> Option<String> {
        let line = self.lines.recv_timeout(wait).ok()?;
        self.seen.push(line.clone());
        Some(line)
    }

    /// The stderr lines that have arrived since the last look, without waiting.
    pub fn arrived(&mut self) -> Vec<String> {
        let new: Vec<String> = self.lines.try_iter().collect();
        self.seen.extend(new.iter().cloned());
        new
    }

    /// The first stderr line that contains `needle`, waiting up to `wait`; a panic that
    /// shows stderr so far if none comes.
    pub fn wait_line(&mut self, needle: &str, wait: Duration) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(l) if l.contains(needle) => return l,
                Some(_) => {}
                None => panic!(
                    "{}: no stderr line with {needle:?} within {wait:?}; stderr:\n{}",
                    self.name,
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// [`Process::finish`] for a command whose stdout is piped: stdout is drained on a
    /// thread meanwhile (a chatty child never blocks on a full pipe), and comes back whole
    /// with the status and stderr.
    pub fn output(mut self, limit: Duration) -> std::process::Output {
        let mut out = self.take_stdout().expect("stdout piped");
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut out, &mut v).map(|_| v)
        });
        let (status, stderr) = self.finish(limit);
        std::process::Output {
            status,
            stdout: reader
                .join()
                .expect("stdout reader")
                .expect("reading stdout"),
            stderr: stderr.into_bytes(),
        }
    }

    /// Send `sig` (the child is ours and not reaped: this cannot fail).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is touched.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({sig}) {}", self.name);
    }

    /// The exit status, waiting up to `limit`; `None` if it still runs then.
    pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Wait for the exit (a panic after `limit`, the child killed), then all of stderr
    /// until its EOF: the status and every stderr line, joined by newlines.
    pub fn finish(mut self, limit: Duration) -> (ExitStatus, String) {
        let Some(status) = self.exit_within(limit) else {
            panic!(
                "{} did not exit within {limit:?}; stderr:\n{}",
                self.name,
                self.seen.join("\n")
            );
        };
        // The writer has exited: the reader thread ends at EOF, which disconnects the
        // channel. Only that ends the collection; a timeout is a failure, not the end.
        loop {
            match self.lines.recv_timeout(READY) {
                Ok(l) => self.seen.push(l),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}: stderr never reached EOF", self.name)
                }
            }
        }
        (status, self.seen.join("\n"))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The first address after `listening on ` in a start-up line.
pub fn listen_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on ").nth(1)?;
    rest.split([' ', ',', '\n']).next()?.parse().ok()
}

/// The `proxy` binary, started: its listen address and its start-up summary. Derefs to
/// its [`Process`].
pub struct ProxyProcess {
    pub process: Process,
    pub addr: SocketAddr,
    /// The start-up summary, from its first line (the one with `listening on`) through
    /// the open-files limit, its last.
    pub summary: String,
}

impl ProxyProcess {
    /// `proxy` (built on first use), to be given its flags.
    pub fn command() -> Command {
        Command::new(crate::bin("proxy"))
    }

    /// Spawn `cmd` (stdout to /dev/null) and wait for its summary.
    pub fn start(cmd: &mut Command) -> ProxyProcess {
        let mut process = Process::spawn(cmd.stdout(Stdio::null()));
        let first = process.wait_line("listening on ", READY);
        let addr = listen_addr(&first)
            .unwrap_or_else(|| panic!("no address in the summary line {first:?}"));
        let mut summary = first + "\n";
        // The rest of the summary ends with the open-files limit (what is missing then
        // fails the assertions on `summary`, which show it).
        while !summary.contains("open files") {
            match process.next_line(Duration::from_secs(5)) {
                Some(line) => summary.push_str(&(line + "\n")),
                None => break,
            }
        }
        ProxyProcess {
            process,
            addr,
            summary,
        }
    }
}

impl std::ops::Deref for ProxyProcess {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.process
    }
}

impl std::ops::DerefMut for ProxyProcess {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}
