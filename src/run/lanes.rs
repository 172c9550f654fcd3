//! Every GPU of a host: `kbench run --devices all|0,1,...` runs one lane per GPU, each a thread
//! with its own `kbench worker` process started with CUDA_VISIBLE_DEVICES naming that GPU alone,
//! so each worker opens its own context and measures its own copy peak and fingerprint.
//!
//! Scheduling is work stealing from one shared queue (`run_pool`): an idle lane takes the next
//! case, so a slow GPU or a long case holds no other lane up. A lane runs one case at a time,
//! so no two cases share a GPU while timed. CPU cases time the host's CPU, so they run alone:
//! with several lanes they are queued after every GPU case and each runs when every lane is
//! idle.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Result;

/// `--devices`: every visible GPU, or these (ordinals among the visible GPUs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelection {
    All,
    List(Vec<u32>),
}

/// `all`, or a comma-separated list of distinct device ordinals: `0,1,3`.
pub fn parse_devices(text: &str) -> Result<DeviceSelection, String> {
    if text.trim() == "all" {
        return Ok(DeviceSelection::All);
    }
    let mut list = Vec::new();
    for part in text.split(',') {
        let index: u32 = part.trim().parse().map_err(|_| {
            format!("`{text}`: expected `all` or device numbers separated by commas, e.g. 0,1")
        })?;
        if list.contains(&index) {
            return Err(format!("`{text}`: device {index} is named twice"));
        }
        list.push(index);
    }
    Ok(DeviceSelection::List(list))
}

/// One lane's GPU: what its worker gets as CUDA_VISIBLE_DEVICES, and the number recorded with
/// each case it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneDevice {
    /// CUDA_VISIBLE_DEVICES for the lane's worker; None: the worker inherits kbench's own.
    pub visible: Option<String>,
    /// The GPU's ordinal: physical (CUDA's numbering without CUDA_VISIBLE_DEVICES) where it can
    /// be known, else its place among the visible GPUs.
    pub index: u32,
    pub physical: bool,
}

impl LaneDevice {
    /// The one lane of a run without `--devices`: the worker opens the first visible GPU.
    pub fn default_lane(cuda_visible_devices: Option<&str>) -> LaneDevice {
        let entries = visible_entries(cuda_visible_devices);
        let (index, physical) = number_of(entries.as_deref().and_then(|e| e.first()), 0);
        LaneDevice {
            visible: None,
            index,
            physical,
        }
    }
}

/// The entries of CUDA_VISIBLE_DEVICES (None where it is not set: every GPU is visible).
fn visible_entries(cuda_visible_devices: Option<&str>) -> Option<Vec<String>> {
    cuda_visible_devices.map(|v| {
        v.split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect()
    })
}

/// The recorded number of the visible device at `ordinal` whose CUDA_VISIBLE_DEVICES entry is
/// `entry`: the entry itself when it is a number (a physical ordinal), else the ordinal.
fn number_of(entry: Option<&String>, ordinal: u32) -> (u32, bool) {
    match entry {
        None => (ordinal, true),
        Some(e) => match e.parse::<u32>() {
            Ok(physical) => (physical, true),
            Err(_) => (ordinal, false),
        },
    }
}

/// The lanes `selection` asks for, given CUDA_VISIBLE_DEVICES and the number of GPUs CUDA sees
/// (`found`: Err with why none can be counted). With no GPU at all, `all` gives one lane (its
/// CUDA cases are skipped with the reason, as without `--devices`); a device that is not there
/// is refused with the count found.
pub fn resolve(
    selection: &DeviceSelection,
    cuda_visible_devices: Option<&str>,
    found: Result<u32, String>,
) -> Result<Vec<LaneDevice>, String> {
    let entries = visible_entries(cuda_visible_devices);
    let lane = |ordinal: u32| {
        let entry = entries.as_ref().and_then(|e| e.get(ordinal as usize));
        let (index, physical) = number_of(entry, ordinal);
        LaneDevice {
            visible: Some(entry.cloned().unwrap_or_else(|| ordinal.to_string())),
            index,
            physical,
        }
    };
    let count = match (&found, selection) {
        (Ok(n), _) => *n,
        (Err(_), DeviceSelection::All) => 0,
        (Err(why), DeviceSelection::List(list)) => {
            return Err(format!(
                "--devices {}: CUDA sees no device here, so there is no device {}: {why}",
                join(list),
                list[0]
            ))
        }
    };
    match selection {
        DeviceSelection::All if count == 0 => {
            Ok(vec![LaneDevice::default_lane(cuda_visible_devices)])
        }
        DeviceSelection::All => Ok((0..count).map(lane).collect()),
        DeviceSelection::List(list) => {
            if let Some(missing) = list.iter().find(|&&i| i >= count) {
                return Err(format!(
                    "--devices {}: there is no device {missing}: CUDA sees {count} device{} \
                     (numbered from 0{})",
                    join(list),
                    if count == 1 { "" } else { "s" },
                    if cuda_visible_devices.is_some() {
                        ", among those CUDA_VISIBLE_DEVICES names"
                    } else {
                        ""
                    }
                ));
            }
            Ok(list.iter().map(|&i| lane(i)).collect())
        }
    }
}

fn join(list: &[u32]) -> String {
    list.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// How a job runs: `Shared` jobs (GPU cases) run on any lane beside others; an `Exclusive` job
/// (a CPU case) runs only while every lane is otherwise idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Shared,
    Exclusive,
}

/// What the caller says after a lane's job: go on, or give this lane no more shared jobs (its
/// GPU hung while opening); it still runs exclusive ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Continue,
    NoMoreShared,
}

/// How a pool ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolEnd {
    Finished,
    /// `stop` was set: the jobs in progress were ended (each runner sees the pool's halt flag)
    /// and handed to `on_done`; the rest never started.
    Stopped,
}

/// How often the dispatcher looks at `stop` while every lane is busy.
const POLL: Duration = Duration::from_millis(50);

/// Runs `jobs` on the lanes, one thread per runner, handing the next job to each lane that is
/// idle (work stealing), and each finished job to `on_done` on the calling thread, as it
/// finishes. With several lanes, shared jobs go first (in their order) and exclusive jobs after;
/// with one lane the order is kept. Each runner is called with the job and a halt flag that is
/// set when `stop` is, or when `on_done` or `on_unrun` fails: it should then return soon. A
/// shared job left when every lane has said `NoMoreShared` goes to `on_unrun` instead.
///
/// A runner that panics costs its job alone: `on_done` gets Err with the panic's message, and
/// the lane takes the next job (the runner should keep nothing a panic could leave half done).
pub fn run_pool<J, O, R>(
    runners: Vec<R>,
    jobs: Vec<(J, Kind)>,
    stop: &AtomicBool,
    mut on_done: impl FnMut(usize, J, Result<O, String>) -> Result<After>,
    mut on_unrun: impl FnMut(J) -> Result<()>,
) -> Result<PoolEnd>
where
    J: Send,
    O: Send,
    R: FnMut(&J, &AtomicBool) -> O + Send,
{
    let lanes = runners.len();
    assert!(lanes > 0, "a pool needs a lane");
    let mut queue: VecDeque<(J, Kind)> = if lanes == 1 {
        jobs.into()
    } else {
        let (shared, exclusive): (Vec<_>, Vec<_>) =
            jobs.into_iter().partition(|(_, k)| *k == Kind::Shared);
        shared.into_iter().chain(exclusive).collect()
    };
    let halt = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel::<(usize, J, Result<O, String>)>();
        let mut senders = Vec::new();
        for (lane, mut runner) in runners.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<J>();
            senders.push(tx);
            let done_tx = done_tx.clone();
            let halt = &halt;
            scope.spawn(move || {
                // The runner (and the worker process it holds) ends with this thread.
                for job in rx {
                    // A panic must not leave the lane busy for good (the dispatcher would wait
                    // for its answer forever): it is the job's outcome.
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runner(&job, halt)))
                        .map_err(|payload| panic_message(payload.as_ref()));
                    if done_tx.send((lane, job, outcome)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut busy = vec![false; lanes];
        // The lane running an exclusive job: nothing else starts meanwhile.
        let mut exclusive_lane: Option<usize> = None;
        let mut shared_ok = vec![true; lanes];
        let mut error: Option<anyhow::Error> = None;
        let fail = |e: anyhow::Error, error: &mut Option<anyhow::Error>| {
            halt.store(true, Ordering::SeqCst);
            error.get_or_insert(e);
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                halt.store(true, Ordering::SeqCst);
            }
            if halt.load(Ordering::SeqCst) {
                break;
            }
            // Hand out every job that can start now, in queue order.
            while let Some((_, kind)) = queue.front() {
                match kind {
                    Kind::Shared if !shared_ok.iter().any(|&ok| ok) => {
                        let (job, _) = queue.pop_front().expect("a front job");
                        if let Err(e) = on_unrun(job) {
                            fail(e, &mut error);
                            break;
                        }
                    }
                    Kind::Shared => match (0..lanes).find(|&l| !busy[l] && shared_ok[l]) {
                        Some(lane) if exclusive_lane.is_none() => {
                            let (job, _) = queue.pop_front().expect("a front job");
                            busy[lane] = true;
                            senders[lane].send(job).expect("the lane's thread is alive");
                        }
                        _ => break,
                    },
                    Kind::Exclusive => {
                        if busy.iter().any(|&b| b) {
                            break;
                        }
                        let (job, _) = queue.pop_front().expect("a front job");
                        busy[0] = true;
                        exclusive_lane = Some(0);
                        senders[0].send(job).expect("the lane's thread is alive");
                        // Nothing else starts until it is done.
                        break;
                    }
                }
            }
            if halt.load(Ordering::SeqCst) {
                break;
            }
            if !busy.iter().any(|&b| b) {
                if queue.is_empty() {
                    break;
                }
                continue;
            }
            match done_rx.recv_timeout(POLL) {
                Ok((lane, job, outcome)) => {
                    busy[lane] = false;
                    if exclusive_lane == Some(lane) {
                        exclusive_lane = None;
                    }
                    match on_done(lane, job, outcome) {
                        Ok(After::Continue) => {}
                        Ok(After::NoMoreShared) => shared_ok[lane] = false,
                        Err(e) => fail(e, &mut error),
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    unreachable!("lane threads live as long as their senders")
                }
            }
        }
        // Stopping: the jobs in progress end soon (their runners see `halt`); what they
        // finished is still handed over, so nothing measured is lost.
        while busy.iter().any(|&b| b) {
            let (lane, job, outcome) = done_rx
                .recv()
                .expect("a busy lane's thread answers before it ends");
            busy[lane] = false;
            if let Err(e) = on_done(lane, job, outcome) {
                error.get_or_insert(e);
            }
        }
        drop(senders);
        match error {
            Some(e) => Err(e),
            None if halt.load(Ordering::SeqCst) => Ok(PoolEnd::Stopped),
            None => Ok(PoolEnd::Finished),
        }
    })
}

/// What a panic said (its message is a `&str` or a `String` when it was given one).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    #[test]
    fn devices_are_parsed() {
        assert_eq!(parse_devices("all"), Ok(DeviceSelection::All));
        assert_eq!(parse_devices("0,1"), Ok(DeviceSelection::List(vec![0, 1])));
        assert_eq!(parse_devices("3"), Ok(DeviceSelection::List(vec![3])));
        assert!(parse_devices("0,0").unwrap_err().contains("named twice"));
        for junk in ["", "x", "0,", "-1", "1;2", "ALL"] {
            assert!(parse_devices(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn devices_resolve_against_what_cuda_sees() {
        let all = DeviceSelection::All;
        let lanes = resolve(&all, None, Ok(2)).unwrap();
        assert_eq!(
            lanes,
            vec![
                LaneDevice {
                    visible: Some("0".into()),
                    index: 0,
                    physical: true
                },
                LaneDevice {
                    visible: Some("1".into()),
                    index: 1,
                    physical: true
                }
            ]
        );
        // Under Slurm, CUDA_VISIBLE_DEVICES already names this job's GPUs.
        let lanes = resolve(&all, Some("2,3"), Ok(2)).unwrap();
        assert_eq!(lanes[1].visible.as_deref(), Some("3"));
        assert_eq!((lanes[1].index, lanes[1].physical), (3, true));
        let lanes = resolve(&all, Some("GPU-aa,GPU-bb"), Ok(2)).unwrap();
        assert_eq!(lanes[1].visible.as_deref(), Some("GPU-bb"));
        assert_eq!((lanes[1].index, lanes[1].physical), (1, false));
        // No GPU: one lane, whose CUDA cases are skipped with the reason.
        let lanes = resolve(&all, None, Err("no CUDA driver".into())).unwrap();
        assert_eq!(lanes, vec![LaneDevice::default_lane(None)]);
        let e = resolve(&DeviceSelection::List(vec![3]), None, Ok(2)).unwrap_err();
        assert!(
            e.contains("no device 3") && e.contains("CUDA sees 2 devices"),
            "{e}"
        );
        let e = resolve(
            &DeviceSelection::List(vec![0]),
            None,
            Err("no driver".into()),
        );
        let e = e.unwrap_err();
        assert!(
            e.contains("sees no device") && e.contains("no driver"),
            "{e}"
        );
        let one = resolve(&DeviceSelection::List(vec![1]), Some("4,6"), Ok(2)).unwrap();
        assert_eq!(one[0].index, 6);
    }

    /// Jobs are (id, kind); each lane records what it ran, and checks that nothing else runs
    /// beside an exclusive job. With several lanes, lane 0 is slow: its first job lasts until
    /// every other shared job is done, so the other lanes must take them all.
    fn pool_run(lanes: usize, jobs: Vec<(usize, Kind)>) -> (Vec<Vec<usize>>, Vec<usize>) {
        let running = AtomicUsize::new(0);
        let shared_done = AtomicUsize::new(0);
        let shared_total = jobs.iter().filter(|(_, k)| *k == Kind::Shared).count();
        let ran: Vec<Mutex<Vec<usize>>> = (0..lanes).map(|_| Mutex::new(Vec::new())).collect();
        let kinds: Vec<Kind> = jobs.iter().map(|(_, k)| *k).collect();
        let runners: Vec<_> = (0..lanes)
            .map(|lane| {
                let (running, ran, kinds, shared_done) = (&running, &ran, &kinds, &shared_done);
                move |job: &usize, _: &AtomicBool| {
                    let others = running.fetch_add(1, Ordering::SeqCst);
                    let shared = kinds[*job] == Kind::Shared;
                    if !shared {
                        assert_eq!(others, 0, "an exclusive job ran beside another");
                    }
                    if shared && lane == 0 && lanes > 1 {
                        while shared_done.load(Ordering::SeqCst) < shared_total - 1 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    ran[lane].lock().unwrap().push(*job);
                    if shared {
                        shared_done.fetch_add(1, Ordering::SeqCst);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    *job
                }
            })
            .collect();
        let mut finished = Vec::new();
        let end = run_pool(
            runners,
            jobs,
            &AtomicBool::new(false),
            |_, job, outcome| {
                assert_eq!(Ok(job), outcome);
                finished.push(job);
                Ok(After::Continue)
            },
            |_| panic!("every lane takes shared jobs"),
        )
        .unwrap();
        assert_eq!(end, PoolEnd::Finished);
        (
            ran.into_iter().map(|m| m.into_inner().unwrap()).collect(),
            finished,
        )
    }

    #[test]
    fn every_job_runs_once_and_idle_lanes_take_the_next() {
        let jobs: Vec<(usize, Kind)> = (0..40)
            .map(|i| {
                (
                    i,
                    if i % 7 == 3 {
                        Kind::Exclusive
                    } else {
                        Kind::Shared
                    },
                )
            })
            .collect();
        for lanes in 1..=4 {
            let (ran, mut finished) = pool_run(lanes, jobs.clone());
            finished.sort();
            assert_eq!(finished, (0..40).collect::<Vec<_>>(), "{lanes} lanes");
            if lanes > 1 {
                // Work stealing: while lane 0 was held by its first job, the others took every
                // other shared job; the exclusive jobs ran after them all, on lane 0.
                assert_eq!(ran[0], vec![0, 3, 10, 17, 24, 31, 38], "{ran:?}");
            } else {
                assert_eq!(ran[0], (0..40).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_lane_that_takes_no_more_shared_jobs_leaves_them_to_the_others_then_to_on_unrun() {
        let jobs: Vec<(usize, Kind)> = (0..10)
            .map(|i| {
                (
                    i,
                    if i == 9 {
                        Kind::Exclusive
                    } else {
                        Kind::Shared
                    },
                )
            })
            .collect();
        // Two lanes, both give up on shared jobs after their first one.
        let runners: Vec<_> = (0..2)
            .map(|_| move |job: &usize, _: &AtomicBool| *job)
            .collect();
        let mut done = Vec::new();
        let mut unrun = Vec::new();
        run_pool(
            runners,
            jobs,
            &AtomicBool::new(false),
            |_, job, _| {
                done.push(job);
                Ok(After::NoMoreShared)
            },
            |job| {
                unrun.push(job);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(done.len() + unrun.len(), 10);
        assert_eq!(
            done.len(),
            3,
            "two shared jobs and the exclusive one: {done:?}"
        );
        assert!(done.contains(&9));
    }

    #[test]
    fn a_stop_ends_the_jobs_in_progress_and_hands_them_over() {
        let stop = AtomicBool::new(false);
        let runners: Vec<_> = (0..3)
            .map(|lane| {
                let stop = &stop;
                move |job: &usize, halt: &AtomicBool| {
                    if lane == 0 {
                        stop.store(true, Ordering::SeqCst);
                        return *job;
                    }
                    while !halt.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    *job
                }
            })
            .collect();
        let mut done = Vec::new();
        let end = run_pool(
            runners,
            (0..10).map(|i| (i, Kind::Shared)).collect(),
            &stop,
            |_, job, _| {
                done.push(job);
                Ok(After::Continue)
            },
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(end, PoolEnd::Stopped);
        done.sort();
        assert_eq!(
            done,
            vec![0, 1, 2],
            "the three jobs in progress, and no other"
        );
    }

    #[test]
    fn a_runner_that_panics_costs_its_job_alone() {
        for lanes in [1, 3] {
            let runners: Vec<_> = (0..lanes)
                .map(|_| {
                    move |job: &usize, _: &AtomicBool| {
                        if *job == 3 {
                            panic!("job {job} broke");
                        }
                        *job
                    }
                })
                .collect();
            let mut done = Vec::new();
            let end = run_pool(
                runners,
                (0..8).map(|i| (i, Kind::Shared)).collect(),
                &AtomicBool::new(false),
                |_, job, outcome| {
                    done.push((job, outcome));
                    Ok(After::Continue)
                },
                |_| panic!("every lane takes shared jobs"),
            )
            .unwrap();
            assert_eq!(end, PoolEnd::Finished);
            done.sort();
            let expected: Vec<(usize, Result<usize, String>)> = (0..8)
                .map(|i| match i {
                    3 => (3, Err("job 3 broke".to_string())),
                    _ => (i, Ok(i)),
                })
                .collect();
            assert_eq!(done, expected, "{lanes} lanes");
        }
    }
}
