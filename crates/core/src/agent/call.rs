//! One tool call, step by step: parse, check, decide, prepare, approve, run, record.
//! [`Session::run_call`] runs the steps in order, each a function of its own:
//! [`Session::parse_call`] (the schema check and deserialization, once, and the call's title),
//! [`Session::check_call`] (the subject resolved once and checked against the capability
//! scope), [`Session::decide_call`] (the policy), [`Session::prepare_call`] and
//! [`Session::approve_call`] (for a call the policy asks about: its reads and preview once, then
//! the user's answer), [`Session::execute_call`] (the tool, confined as the decision says, its
//! progress forwarded) and [`Session::record_call`] (the envelope and the events).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::session::Session;
use super::turn::RequestedCall;
use super::{AgentEvent, ApprovalAnswer, ApprovalRequest, CallStatus, TurnHost};
use crate::capability::Access;
use crate::policy::{Action, Answer, Call, Decision, PolicySearchGate};
use crate::runtime::process::SHELL;
use serde_json::Value;

use crate::tool::{
    Artifact, CallTarget, CallView, Deprecation, Describe, DynTool, Envelope, ParsedCall,
    ProgressBudget, ProgressSink, Subject, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// A call that ends before it runs: the error the model gets, and how the turn counts it.
type Stopped = (ToolError, Verdict);

impl Session {
    /// One call, every step: parse and announce it, then under the tool lock (mutating calls
    /// alone, read-only ones together) check, decide, prepare, approve and run it; record it.
    pub(super) async fn run_call(
        &self,
        call: &RequestedCall,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> (Envelope, Verdict) {
        let started = Instant::now();
        // Another agent's name for a tool (`Read`, `shell`, opencode's `read {filePath}`): the
        // call runs as the canonical tool's, whose name and arguments everything below sees.
        let alias = self.alias_of(call);
        let call = alias.as_ref().map_or(call, |(aliased, _)| aliased);
        let tool = self.tool(&call.name);
        let (parsed, view) = self.parse_call(call, tool.as_deref(), host);
        // Mutating calls (and unknown ones) run alone; read-only calls share the lock.
        let mutating = tool.as_ref().is_none_or(|t| t.spec().mutating);
        let _read_guard;
        let _write_guard;
        if mutating {
            _write_guard = self.tool_lock.write().await;
        } else {
            _read_guard = self.tool_lock.read().await;
        }
        let (result, verdict) = match tool {
            None => (
                Err(ToolError::NotFound(format!(
                    "unknown tool `{}`; the available tools are: {}",
                    call.name,
                    self.tool_names()
                ))),
                Verdict::Failed,
            ),
            Some(tool) => {
                match self
                    .gated(call, tool.as_ref(), parsed, view, host, cancel)
                    .await
                {
                    Ok(result) => (result, Verdict::Ran),
                    Err((error, verdict)) => (Err(error), verdict),
                }
            }
        };
        let deprecation = alias.as_ref().map(|(_, deprecation)| deprecation.clone());
        self.record_call(call, deprecation, result, verdict, started, host)
    }

    /// Step 1, parse: the arguments validated and deserialized once (the call's title and
    /// locations come from the typed arguments, and the gates and the run use the same parse),
    /// and the call announced to the host.
    fn parse_call(
        &self,
        call: &RequestedCall,
        tool: Option<&dyn DynTool>,
        host: &Arc<dyn TurnHost>,
    ) -> (Option<Result<ParsedCall, ToolError>>, CallView) {
        let spec = tool.map(|t| t.spec());
        let parsed = match (tool, &call.invalid) {
            (Some(tool), None) => Some(tool.parse(
                &call.input,
                Describe {
                    roots: self.runtime.roots(),
                },
            )),
            _ => None,
        };
        let view = match &parsed {
            Some(Ok(parsed)) => parsed.view.clone(),
            _ => CallView {
                title: spec.map_or_else(|| call.name.clone(), |s| s.title.clone()),
                locations: Vec::new(),
            },
        };
        host.event(AgentEvent::ToolCall {
            call_id: call.id.clone(),
            tool_id: call.name.clone(),
            kind: spec.map_or(ToolKind::Other, |s| s.kind),
            args: call.input.clone(),
            view: view.clone(),
        });
        (parsed, view)
    }

    /// The steps a known tool's call goes through under the lock: check, decide, prepare and
    /// approve (when asked), run. `Err` when it stops before running.
    async fn gated(
        &self,
        call: &RequestedCall,
        tool: &dyn DynTool,
        parsed: Option<Result<ParsedCall, ToolError>>,
        view: CallView,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> Result<Result<ToolOutput, ToolError>, Stopped> {
        let spec = tool.spec();
        let mut parsed = Self::parsed(call, parsed, cancel)?;
        self.check_call(spec, &mut parsed)
            .map_err(|error| (error, Verdict::Denied))?;
        let decision = self.decide_call(spec, &parsed)?;
        let (progress_tx, progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let progress_budget = ProgressBudget::new(PROGRESS_BUDGET);
        let mut ctx = ToolContext {
            runtime: self.runtime.clone(),
            session: self.state.clone(),
            call_id: call.id.clone(),
            cancel: cancel.child_token(),
            progress: ProgressSink::bounded(progress_tx, progress_budget.clone()),
        };
        let asked = decision.action == Action::Ask;
        if asked {
            self.prepare_call(tool, &mut parsed, &mut ctx, &decision)
                .await?;
            self.approve_call(call, spec, view, &mut parsed, &decision, host, cancel)
                .await?;
        }
        self.confine(&mut ctx, &decision, spec);
        let run = Run {
            tool,
            parsed,
            prepare: !asked,
            ctx,
            progress: progress_rx,
            budget: progress_budget,
        };
        Ok(self.execute_call(call, run, host, cancel).await)
    }

    /// The parse's result, unless the call was cancelled or its arguments were not an object.
    fn parsed(
        call: &RequestedCall,
        parsed: Option<Result<ParsedCall, ToolError>>,
        cancel: &CancellationToken,
    ) -> Result<ParsedCall, Stopped> {
        if cancel.is_cancelled() {
            return Err((ToolError::Cancelled, Verdict::Failed));
        }
        if let Some(error) = &call.invalid {
            return Err((
                ToolError::InvalidArguments {
                    tool: call.name.clone(),
                    message: error.clone(),
                },
                Verdict::Failed,
            ));
        }
        match parsed {
            Some(Ok(parsed)) => Ok(parsed),
            Some(Err(error)) => Err((error, Verdict::Failed)),
            None => Err((
                ToolError::invariant(
                    "running a tool call",
                    format!("the arguments of `{}` were not parsed", call.name),
                ),
                Verdict::Failed,
            )),
        }
    }

    /// Step 3, decide: the policy (rules, mode, watchdog) on the call's target and its subject
    /// as resolved by the check. A denial stops the call.
    fn decide_call(&self, spec: &ToolSpec, parsed: &ParsedCall) -> Result<Decision, Stopped> {
        let policy_call = Call {
            spec,
            target: &parsed.target,
            runtime: &self.runtime,
        };
        let decision = if spec.subject == Subject::Paths {
            let files: Vec<(&str, &std::path::Path)> = parsed
                .paths
                .iter()
                .filter_map(|p| Some((p.user.as_str(), p.canonical.as_deref()?)))
                .collect();
            self.policy.decide_paths(&policy_call, &files)
        } else {
            self.policy
                .decide_resolved(&policy_call, parsed.subject.as_deref())
        };
        if decision.action == Action::Deny {
            let message = decision
                .message_for_model()
                .unwrap_or_else(|| decision.explanation.to_string());
            return Err((ToolError::Denied(message), Verdict::Denied));
        }
        Ok(decision)
    }

    /// Step 4, prepare (a call the policy asks about): its reads and preview, once, for the
    /// prompt. A call allowed without a prompt is prepared as its run starts.
    async fn prepare_call(
        &self,
        tool: &dyn DynTool,
        parsed: &mut ParsedCall,
        ctx: &mut ToolContext,
        decision: &Decision,
    ) -> Result<(), Stopped> {
        if decision.hard_links.is_some() {
            // The prompt's preview (an edit's diff) is for the user, who is being asked
            // about exactly this file; the run gets the same permission once approved.
            ctx.runtime = ctx.runtime.allowing_linked_reads();
        }
        match tool.prepare(parsed, ctx).await {
            Ok(()) => Ok(()),
            // The model has not been allowed to see a hard-linked file: an error
            // built from its content must not reach it.
            Err(_) if decision.hard_links.is_some() => Err((
                ToolError::Denied(format!(
                    "{} The change could not be prepared, so nothing was asked or \
                     written; `read` the file first (which asks).",
                    decision.explanation
                )),
                Verdict::Failed,
            )),
            // A call that would fail anyway (an edit whose old text is absent) is not
            // worth the user's attention: the model gets the error at once.
            Err(error) => Err((error, Verdict::Failed)),
        }
    }

    /// Step 5, approve: the host asks the user, with the preview; the answer is remembered. A
    /// rejection or a cancelled prompt stops the call.
    #[expect(
        clippy::too_many_arguments,
        reason = "the step's inputs: the call, its spec, view and parse, the decision, the host"
    )]
    async fn approve_call(
        &self,
        call: &RequestedCall,
        spec: &ToolSpec,
        view: CallView,
        parsed: &mut ParsedCall,
        decision: &Decision,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> Result<(), Stopped> {
        // The preview goes to the prompt; the prepared plan stays for the run.
        let preview = parsed
            .prepared
            .as_mut()
            .and_then(|prepared| prepared.preview.take());
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool_id: call.name.clone(),
            kind: spec.kind,
            args: call.input.clone(),
            view,
            preview,
            reason: decision.explanation.to_string(),
            why: decision.explanation.cause.plain(),
            always_scope: decision.always_scope.clone(),
            unconfined: decision.unconfined,
        };
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => ApprovalAnswer::Cancelled,
            answer = host.approve(request) => answer,
        };
        let remembered = match answer {
            ApprovalAnswer::Answered(answer) => answer,
            ApprovalAnswer::Cancelled => {
                cancel.cancel();
                return Err((ToolError::Cancelled, Verdict::Denied));
            }
        };
        self.policy.remember(decision, remembered);
        if matches!(remembered, Answer::RejectOnce | Answer::RejectAlways) {
            return Err((
                ToolError::Denied(
                    "The user rejected this tool call. Do not retry it as is; ask the user \
                     how to proceed or take another approach."
                        .into(),
                ),
                Verdict::Denied,
            ));
        }
        Ok(())
    }

    /// Where the run is confined, as the decision says: unconfined once approved so, contained
    /// when nobody approved it, read-only commands in `read-only` mode, and the files a search
    /// finds decided one by one.
    fn confine(&self, ctx: &mut ToolContext, decision: &Decision, spec: &ToolSpec) {
        if decision.unconfined {
            // Allowed (by the user, or by an "always allow without the sandbox" answer for its
            // keys): this call's shell commands run unconfined, and only this call's.
            ctx.runtime = ctx.runtime.allowing_unconfined();
        }
        if decision.contained {
            // Nobody approved it: it runs where a misclassification costs nothing, from Keel's
            // rendering of what it analysed.
            let command = decision.raw_command.clone().unwrap_or_default();
            let script = decision.rendered.clone().unwrap_or_default();
            tracing::info!(%command, %script, "runs contained, as Keel rendered it");
            ctx.runtime = ctx.runtime.contained(&command, &script);
        }
        if self.policy.mode() == crate::policy::Mode::ReadOnly {
            // The mode now, not the mode the session opened with.
            ctx.runtime = ctx.runtime.with_read_only_commands();
        }
        // What the files a search finds may show is decided file by file, as reads.
        ctx.runtime = ctx.runtime.with_search_gate(Arc::new(PolicySearchGate::new(
            self.policy.clone(),
            spec.clone(),
        )));
    }

    /// Step 6, run: the call in progress, its live output forwarded to the host as the host
    /// can take it, the tool run (prepared first when no prompt prepared it) until it answers
    /// or is cancelled.
    async fn execute_call(
        &self,
        call: &RequestedCall,
        run: Run<'_>,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        let Run {
            tool,
            parsed,
            prepare,
            ctx,
            progress: mut progress_rx,
            budget: progress_budget,
        } = run;
        host.event(AgentEvent::ToolStatus {
            call_id: call.id.clone(),
            status: CallStatus::InProgress,
        });
        let forward = {
            let host = host.clone();
            let call_id = call.id.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                while let Some(progress) = progress_rx.recv().await {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => break,
                        () = host.ready() => {}
                    }
                    progress_budget.taken(&progress);
                    host.event(AgentEvent::ToolProgress {
                        call_id: call_id.clone(),
                        progress,
                    });
                }
            })
        };
        let timeout = self.config.tool_timeouts.get(&call.name).copied();
        let mutating = tool.spec().mutating;
        let result = run_with_cancel(tool, parsed, prepare, &ctx, cancel, timeout, mutating).await;
        drop(ctx);
        let _ = forward.await;
        result
    }

    /// Step 7, record: the envelope (with an alias's deprecation), Keel's own failures logged
    /// whole, the plan and the result sent to the host (whose recorder keeps them).
    fn record_call(
        &self,
        call: &RequestedCall,
        deprecation: Option<Deprecation>,
        result: Result<ToolOutput, ToolError>,
        verdict: Verdict,
        started: Instant,
        host: &Arc<dyn TurnHost>,
    ) -> (Envelope, Verdict) {
        let failed = result.is_err();
        let mut envelope = Envelope::from_result(result, started.elapsed());
        if let Some(deprecation) = deprecation {
            envelope.metadata.deprecation = Some(deprecation);
        }
        if let Some(report) = envelope.internal_error() {
            // A failure of Keel itself (the call failed, or its output could not be kept whole):
            // the log and the user get the whole chain (the user through the envelope's
            // artifact), the model a neutral message.
            tracing::error!(
                call_id = %call.id,
                tool = %call.name,
                error = %report,
                "internal error during a tool call"
            );
        }
        for artifact in &envelope.artifacts {
            if let Artifact::Plan { entries } = artifact {
                host.event(AgentEvent::Plan {
                    entries: entries.clone(),
                });
            }
        }
        let status = if failed {
            CallStatus::Failed
        } else {
            CallStatus::Completed
        };
        host.event(AgentEvent::ToolResult {
            call_id: call.id.clone(),
            status,
            envelope: envelope.clone(),
        });
        host.call_finished(&call.id, &envelope.artifacts);
        let verdict = match verdict {
            Verdict::Ran if failed => Verdict::Failed,
            other => other,
        };
        (envelope, verdict)
    }

    /// Step 2, check: the capability check on the call's subject, before the policy sees it. A
    /// path subject is resolved here, once; the policy and the tool use `parsed.subject`.
    fn check_call(
        &self,
        spec: &crate::tool::ToolSpec,
        parsed: &mut ParsedCall,
    ) -> Result<(), ToolError> {
        match (&spec.subject, &parsed.target) {
            (Subject::Path(Some(_)), CallTarget::Path(path)) => {
                let access = if spec.mutating {
                    Access::Write
                } else {
                    Access::Read
                };
                let canonical = self.runtime.resolve(path)?;
                self.runtime.check(&canonical, access)?;
                parsed.subject = Some(canonical);
                Ok(())
            }
            (Subject::Url(_), CallTarget::Url(url)) => {
                let host = url::Url::parse(url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
                    .ok_or_else(|| {
                        ToolError::BadArgument(format!("`{url}` is not an absolute http(s) URL"))
                    })?;
                self.runtime.scope().check_host(&host)?;
                Ok(())
            }
            (Subject::Command(_), CallTarget::Command(command)) => {
                self.runtime
                    .scope()
                    .check_command(SHELL, &["-c".to_owned(), command.line.clone()])?;
                Ok(())
            }
            (Subject::Paths, _) => {
                for path in &mut parsed.paths {
                    let canonical = self.runtime.resolve(&path.user)?;
                    self.runtime.check(&canonical, Access::Write)?;
                    path.canonical = Some(canonical);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The call as the canonical tool's when it names another agent's tool (or uses another
    /// agent's argument names), with the `_deprecation` block its result carries.
    fn alias_of(&self, call: &RequestedCall) -> Option<(RequestedCall, crate::tool::Deprecation)> {
        if call.invalid.is_some() {
            return None;
        }
        let properties = |id: &str| -> Option<Vec<String>> {
            let tool = self.tool(id)?;
            Some(
                tool.spec()
                    .parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
            )
        };
        let resolved = crate::tools::aliases::resolve(&call.name, &call.input, &properties)?;
        let deprecation = resolved.deprecation();
        tracing::warn!(
            call_id = %call.id,
            alias = %call.name,
            tool = %resolved.alias.tool,
            agent = resolved.alias.agent.name(),
            "the model called another agent's tool name; ran the canonical tool"
        );
        let (input, invalid) = match resolved.input {
            Ok(input) => (input, None),
            Err(why) => (call.input.clone(), Some(why)),
        };
        Some((
            RequestedCall {
                id: call.id.clone(),
                model_id: call.model_id.clone(),
                name: resolved.alias.tool.to_owned(),
                input,
                invalid,
            },
            deprecation,
        ))
    }
}

/// What [`Session::execute_call`] runs: the tool, its parsed call, whether it still has to be prepared,
/// its context, and the receiving end of its progress with the budget it counts against.
struct Run<'a> {
    tool: &'a dyn DynTool,
    parsed: ParsedCall,
    prepare: bool,
    ctx: ToolContext,
    progress: tokio::sync::mpsc::UnboundedReceiver<crate::tool::ToolProgress>,
    budget: Arc<ProgressBudget>,
}

/// How the turn counts a finished call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Ran,
    Denied,
    Failed,
}

/// Runs a tool until it answers; on cancel the tool sees the token and gets a grace period to
/// stop its processes, then it is dropped (dropping kills what it spawned). A mutating tool that
/// finishes its work within the grace period reports what it did: the change happened, and the
/// model and the editor must see it (a read-only one that finished anyway is cancelled).
async fn run_with_cancel(
    tool: &dyn crate::tool::DynTool,
    mut call: ParsedCall,
    prepare: bool,
    ctx: &ToolContext,
    cancel: &CancellationToken,
    timeout: Option<Duration>,
    mutating: bool,
) -> Result<crate::tool::ToolOutput, ToolError> {
    let run = async move {
        if prepare {
            tool.prepare(&mut call, ctx).await?;
        }
        tool.run(call, ctx).await
    };
    let run = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, run)
                .await
                .unwrap_or(Err(ToolError::Timeout(limit))),
            None => run.await,
        }
    };
    tokio::pin!(run);
    tokio::select! {
        result = &mut run => result,
        _ = cancel.cancelled() => {
            match tokio::time::timeout(CANCEL_GRACE, &mut run).await {
                Ok(Ok(output)) if mutating => Ok(output),
                Ok(Ok(_)) | Err(_) => Err(ToolError::Cancelled),
                Ok(Err(error)) => Err(error),
            }
        }
    }
}

/// Live output of one tool call waiting for the front-end beyond which chunks are dropped from
/// the live view (never from the result or the sidecar).
const PROGRESS_BUDGET: usize = 4 * 1024 * 1024;

/// How long a cancelled tool gets to wind down (kill its processes, answer) before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);
