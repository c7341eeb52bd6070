//! Structural checks of the control requests: JOB_CONTROL (`bmod`, `bswitch`,
//! `btop`, `bbot`, `brequeue`, `brun`, `bkill -r`), ADMIN_CONTROL (`badmin hclose|hopen|qclose|qopen|qact|
//! qinact|mbdrestart`) and HISTORY_QUERY (`bhist`). Meaning (does the queue
//! exist, may the caller) is mbatchd's logic; here only what no request may
//! carry: job id 0, names that are not names, an empty or meaningless request.

use lava_batch_wire as wire;

use crate::{LlError, NAME_BYTES_MAX, PATH_BYTES_MAX, QueueName, SLOTS_MAX, check_text, job_ref};

fn check_jobs(field: &str, jobs: &[wire::WireJobRef]) -> Result<(), LlError> {
    for (idx, job) in jobs.iter().enumerate() {
        job_ref(&format!("{field}[{idx}]"), *job)?;
    }
    Ok(())
}

/// Checks a JOB_CONTROL request.
pub fn check_job_control(request: &wire::JobControlRequest) -> Result<(), LlError> {
    if request.jobs.is_empty() {
        return Err(LlError::new("control.jobs", "is empty"));
    }
    check_jobs("control.jobs", &request.jobs)?;
    match &request.action {
        wire::JobControlAction::Modify(modify) => check_modify(modify),
        wire::JobControlAction::Switch { queue } => {
            QueueName::parse("control.switch.queue", queue).map(|_| ())
        }
        wire::JobControlAction::Move { position, .. } => {
            if *position == 0 {
                return Err(LlError::new("control.move.position", "must be 1 or more"));
            }
            Ok(())
        }
        wire::JobControlAction::Requeue { done, exit, running, pending, .. } => {
            if !done && !exit && !running && !pending {
                return Err(LlError::new("control.requeue", "selects no job status"));
            }
            Ok(())
        }
        wire::JobControlAction::Run { hosts } => {
            if request.jobs.len() != 1 {
                return Err(LlError::new("control.jobs", "brun names exactly one job"));
            }
            if hosts.is_empty() {
                return Err(LlError::new("control.run.hosts", "is empty"));
            }
            if hosts.len() > SLOTS_MAX as usize {
                return Err(LlError::new("control.run.hosts", format!("more than {SLOTS_MAX} hosts")));
            }
            for (idx, host) in hosts.iter().enumerate() {
                let field = format!("control.run.hosts[{idx}]");
                check_text(&field, host, NAME_BYTES_MAX)?;
                if host.is_empty() || host.chars().any(char::is_whitespace) {
                    return Err(LlError::new(field, "is not a host name"));
                }
            }
            Ok(())
        }
        wire::JobControlAction::ForceExit => Ok(()),
    }
}

fn check_modify(modify: &wire::JobModify) -> Result<(), LlError> {
    if *modify == wire::JobModify::default() {
        return Err(LlError::new("control.modify", "changes nothing"));
    }
    if let Some(queue) = &modify.queue {
        QueueName::parse("control.modify.queue", queue)?;
    }
    if let Some(name) = &modify.job_name {
        check_text("control.modify.job_name", name, NAME_BYTES_MAX)?;
    }
    if let Some(n) = modify.n_slots.filter(|n| *n > SLOTS_MAX) {
        return Err(LlError::new(
            "control.modify.n_slots",
            format!("{n} slots, at most {SLOTS_MAX} allowed"),
        ));
    }
    if let Some(res_req) = &modify.res_req {
        check_text("control.modify.res_req", res_req, PATH_BYTES_MAX)?;
    }
    Ok(())
}

/// Checks an ADMIN_CONTROL request.
pub fn check_admin_control(request: &wire::AdminControlRequest) -> Result<(), LlError> {
    if request.action == wire::AdminAction::MbdRestart && !request.names.is_empty() {
        return Err(LlError::new("admin.names", "mbdrestart takes no names"));
    }
    for (idx, name) in request.names.iter().enumerate() {
        let field = format!("admin.names[{idx}]");
        check_text(&field, name, NAME_BYTES_MAX)?;
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(LlError::new(field, "is not a host or queue name"));
        }
    }
    Ok(())
}

/// Checks a HISTORY_QUERY.
pub fn check_history_query(query: &wire::HistoryQuery) -> Result<(), LlError> {
    check_jobs("history.jobs", &query.jobs)?;
    check_text("history.user", &query.user, NAME_BYTES_MAX)?;
    if query.state_filter > wire::state_filter::SUSPENDED {
        return Err(LlError::new(
            "history.state_filter",
            format!("{} is not a state filter", query.state_filter),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32) -> wire::WireJobRef {
        wire::WireJobRef { job_id: id, array_index: 0 }
    }

    fn control(action: wire::JobControlAction) -> wire::JobControlRequest {
        wire::JobControlRequest { jobs: vec![job(1)], action }
    }

    fn modify(change: impl FnOnce(&mut wire::JobModify)) -> wire::JobControlRequest {
        let mut modify = wire::JobModify::default();
        change(&mut modify);
        control(wire::JobControlAction::Modify(modify))
    }

    // Goal: good requests pass; each defect is refused naming its field.
    #[test]
    fn job_control_defects_name_their_field() {
        assert_eq!(check_job_control(&modify(|m| m.run_limit_s = Some(60))), Ok(()));
        assert_eq!(check_job_control(&modify(|m| m.job_name = Some(String::new()))), Ok(()));
        let switch = control(wire::JobControlAction::Switch { queue: "night".into() });
        assert_eq!(check_job_control(&switch), Ok(()));
        let cases = [
            ("control.jobs", wire::JobControlRequest { jobs: vec![], ..switch.clone() }),
            ("control.jobs[1]", wire::JobControlRequest { jobs: vec![job(1), job(0)], ..switch.clone() }),
            ("control.modify", modify(|_| {})),
            ("control.modify.queue", modify(|m| m.queue = Some("a b".into()))),
            ("control.modify.job_name", modify(|m| m.job_name = Some("x\0y".into()))),
            ("control.modify.n_slots", modify(|m| m.n_slots = Some(SLOTS_MAX + 1))),
            ("control.modify.res_req", modify(|m| m.res_req = Some("r".repeat(PATH_BYTES_MAX + 1)))),
            ("control.switch.queue", control(wire::JobControlAction::Switch { queue: String::new() })),
            (
                "control.move.position",
                control(wire::JobControlAction::Move { to_top: true, position: 0, owner_list: false }),
            ),
        ];
        for (field, request) in cases {
            assert_eq!(check_job_control(&request).expect_err(field).field, field);
        }
    }

    // Goal: administrator orders carry names only, and mbdrestart none.
    #[test]
    fn admin_control_defects_name_their_field() {
        let request = |action, names: &[&str]| wire::AdminControlRequest {
            action,
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        assert_eq!(check_admin_control(&request(wire::AdminAction::HostClose, &["hostA"])), Ok(()));
        assert_eq!(check_admin_control(&request(wire::AdminAction::QueueInactivate, &[])), Ok(()));
        assert_eq!(check_admin_control(&request(wire::AdminAction::MbdRestart, &[])), Ok(()));
        let field = |r: wire::AdminControlRequest| check_admin_control(&r).expect_err("refused").field;
        assert_eq!(field(request(wire::AdminAction::MbdRestart, &["x"])), "admin.names");
        assert_eq!(field(request(wire::AdminAction::QueueClose, &["normal", ""])), "admin.names[1]");
        assert_eq!(field(request(wire::AdminAction::HostOpen, &["a b"])), "admin.names[0]");
        assert_eq!(field(request(wire::AdminAction::HostOpen, &["a\0"])), "admin.names[0]");
    }

    // Goal: a history query names real jobs and a known state filter.
    #[test]
    fn history_query_defects_name_their_field() {
        let good =
            wire::HistoryQuery { jobs: vec![job(3)], user: "all".into(), state_filter: 1, after_job: 0 };
        assert_eq!(check_history_query(&good), Ok(()));
        let field = |q: wire::HistoryQuery| check_history_query(&q).expect_err("refused").field;
        assert_eq!(field(wire::HistoryQuery { jobs: vec![job(0)], ..good.clone() }), "history.jobs[0]");
        assert_eq!(field(wire::HistoryQuery { user: "a\0".into(), ..good.clone() }), "history.user");
        assert_eq!(field(wire::HistoryQuery { state_filter: 9, ..good }), "history.state_filter");
    }
}
