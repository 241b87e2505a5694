"""Drives the built reference agent with the official ACP Python SDK (agent-client-protocol,
pinned in requirements.txt) as an editor would: new, select, prompt, escalate (allow and reject),
cancel, kill, load. Every message the agent sends is validated against the SDK's pydantic schema
of ACP. Prints one JSON object: {failures, transcript, timings}.

python python_driver.py AGENT_BINARY WORK_DIR
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import acp
from acp import schema
from acp.connection import StreamDirection
from acp.stdio import spawn_agent_process

AGENT, WORK = sys.argv[1], Path(sys.argv[2])
SESSIONS = WORK / "sessions"
WS = WORK / "ws"
WS.mkdir(parents=True, exist_ok=True)
WS_REAL = str(WS.resolve())
# Ended by `s`, so no concurrent run's marker (say 30.12345s) contains this one (30.1234s).
MARKER = f"30.{os.getpid()}s"

failures: list[str] = []
timings: dict[str, int] = {}
transcript: list[dict] = []
step = "start"

RESPONSES = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/set_config_option": schema.SetSessionConfigOptionResponse,
    "session/prompt": schema.PromptResponse,
}
AGENT_METHODS = {
    "session/update": schema.SessionNotification,
    "session/request_permission": schema.RequestPermissionRequest,
}


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"{step}: {what}")


def redact(message: dict) -> dict:
    text = json.dumps(message)
    for real, name in ((WS_REAL, "[WS]"), (str(WS), "[WS]"), (str(SESSIONS), "[SESSIONS]"), (MARKER, "[MARKER]")):
        text = text.replace(real, name)
    value = json.loads(text)
    update = (value.get("params") or {}).get("update") or {}
    facts = (update.get("rawOutput") or {}).get("facts")
    if isinstance(facts, dict):
        for key in ("backend", "enforcement"):
            if key in facts:
                facts[key] = f"[{key.upper()}]"
        if facts.get("cancelled") is True:
            facts["signal"] = "[SIGNAL]"
            facts["exit_code"] = "[EXIT]"
            for c in update.get("content") or []:
                if "text" in (c.get("content") or {}):
                    c["content"]["text"] = "[CANCELLED OUTPUT]"
    return value


class Observer:
    """Records every line both ways and validates what the agent sends."""

    def __init__(self) -> None:
        self.sent: dict = {}

    def __call__(self, event) -> None:
        m = event.message
        if event.direction == StreamDirection.OUTGOING:
            if "method" in m and "id" in m:
                self.sent[m["id"]] = m["method"]
            transcript.append({"step": step, "from": "client", "message": redact(m)})
            return
        transcript.append({"step": step, "from": "agent", "message": redact(m)})
        try:
            if "method" in m:
                model = AGENT_METHODS.get(m["method"])
                if model is None:
                    failures.append(f"{step}: unexpected agent method {m['method']}")
                else:
                    model.model_validate(m.get("params"))
            elif "result" in m:
                model = RESPONSES.get(self.sent.get(m.get("id")))
                if model is not None:
                    model.model_validate(m["result"])
            elif "error" in m:
                schema.Error.model_validate(m["error"])
        except Exception as e:  # a schema violation
            failures.append(f"{step}: agent message fails the SDK schema: {json.dumps(m)} {e}")


updates: list[dict] = []
asked: list[dict] = []


class Editor:
    async def request_permission(self, session_id, tool_call, options, **kwargs):
        asked.append(tool_call.model_dump(by_alias=True, exclude_none=True))
        allow = str((tool_call.raw_input or {}).get("justification", "")).startswith("allow")
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id="allow-once" if allow else "reject-once")
        )

    async def session_update(self, session_id, update, **kwargs):
        updates.append(update.model_dump(by_alias=True, exclude_none=True, mode="json"))


def text(t: str):
    return [schema.TextContentBlock(type="text", text=t)]


def settled(call_id):
    found = [u for u in updates if u.get("sessionUpdate") == "tool_call_update" and u.get("toolCallId") == call_id and u.get("content")]
    return found[-1] if found else None


def last_call_id():
    calls = [u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"]
    return calls[-1] if calls else None


def marker_processes():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if MARKER in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(pid)
            except OSError:
                pass
    return found


async def main() -> None:
    global step
    t0 = time.monotonic()
    session_id = None
    ids_before: list[str] = []
    args = ("--sessions", str(SESSIONS))
    try:
        async with spawn_agent_process(Editor(), AGENT, *args, observers=[Observer()]) as (conn, proc):
            step = "initialize"
            init = await conn.initialize(protocol_version=1)
            check(init.protocol_version == 1, "protocol version 1")

            step = "new"
            created = await conn.new_session(cwd=str(WS))
            session_id = created.session_id
            check(created.config_options[0].current_value == "read-only", "starts read-only")

            step = "prompt_denied"
            await conn.prompt(session_id=session_id, prompt=text('tool bash {"command":"printf x > denied.txt"}'))
            denied = settled(last_call_id())
            check(denied is not None and denied["status"] == "failed" and denied["rawOutput"]["code"] == "DENIED", "the write is denied")
            check(not (WS / "denied.txt").exists(), "denied.txt absent")

            step = "escalate_allow"
            await conn.prompt(session_id=session_id, prompt=text('tool bash {"command":"printf x > granted.txt","sandbox_permissions":"workspace-write","justification":"allow: save the file"}'))
            check(len(asked) == 1 and asked[0]["toolCallId"] == last_call_id(), "asked about the announced call")
            check((settled(last_call_id()) or {}).get("status") == "completed", "granted call completed")
            check((WS / "granted.txt").exists(), "granted.txt landed")

            step = "escalate_reject"
            await conn.prompt(session_id=session_id, prompt=text('tool bash {"command":"printf x > rejected.txt","sandbox_permissions":"workspace-write","justification":"reject: please"}'))
            check(len(asked) == 2, "asked once more")
            check((settled(last_call_id()) or {}).get("rawOutput", {}).get("code") == "ESCALATION_REJECTED", "rejected")
            check(not (WS / "rejected.txt").exists(), "rejected.txt absent")

            step = "select"
            selected = await conn.set_config_option(config_id="permission", session_id=session_id, value="workspace-write")
            check(selected.config_options[0].current_value == "workspace-write", "selected workspace-write")
            await conn.prompt(session_id=session_id, prompt=text('tool write {"path":"w.txt","content":"w"}'))
            wrote = settled(last_call_id()) or {}
            check(wrote.get("status") == "completed" and any(c.get("type") == "diff" and c.get("newText") == "w" for c in wrote.get("content", [])), "write with a diff")

            step = "cancel"
            known = {u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"}
            turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=text(f'tool bash {{"command":"sleep {MARKER}; echo late"}}\ntool bash {{"command":"printf x > after-cancel.txt"}}')))
            started = time.monotonic()
            # This prompt's first call is running: announced after the earlier ones, in progress, on the host.
            while not (any(u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "in_progress" and u.get("toolCallId") not in known for u in updates) and marker_processes()):
                if time.monotonic() - started > 60:
                    raise RuntimeError("the sleep never started")
                await asyncio.sleep(0.01)
            cancelled_at = time.monotonic()
            await conn.cancel(session_id=session_id)
            stop = await turn
            timings["cancel_to_stop_ms"] = int((time.monotonic() - cancelled_at) * 1000)
            check(stop.stop_reason == "cancelled", f"stop reason cancelled, got {stop.stop_reason}")
            # A hang guard, not a speed test (timings are reported); nothing of the call may be
            # alive once the agent answered: the host is read at once, with no grace.
            check(not marker_processes(), f"no process of the call remains when the agent answered: {marker_processes()}")
            check(timings["cancel_to_stop_ms"] < 60000, f"stopped within 60 s, a hang guard ({timings['cancel_to_stop_ms']} ms)")
            check(not (WS / "after-cancel.txt").exists(), "no further tool ran")

            step = "kill"
            await conn.set_config_option(config_id="permission", session_id=session_id, value="read-only")
            ids_before = [u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"]
            proc.kill()
            await proc.wait()
    except Exception as e:
        if step != "kill":
            failures.append(f"{step}: {e!r}")

    updates.clear()
    try:
        async with spawn_agent_process(Editor(), AGENT, *args, observers=[Observer()]) as (conn, proc):
            step = "load"
            await conn.initialize(protocol_version=1)
            loaded = await conn.load_session(cwd=str(WS), session_id=session_id)
            await asyncio.sleep(0.05)
            check(loaded.config_options[0].current_value == "workspace-write", "the durable truth after the kill")
            cards = [u for u in updates if u.get("sessionUpdate") == "tool_call"]
            check([c["toolCallId"] for c in cards] == ids_before, f"history ids {[c['toolCallId'] for c in cards]} vs {ids_before}")
            check(all(c.get("status") in ("completed", "failed") for c in cards), "final statuses")
            check(len([u for u in updates if u.get("sessionUpdate") == "user_message_chunk"]) == 5, "five user prompts replayed")
            updates.clear()
            await conn.prompt(session_id=session_id, prompt=text('tool read {"path":"w.txt"}'))
            call = last_call_id()
            check(call not in ids_before, f"a fresh id after the restart: {call}")
            check(((settled(call) or {}).get("content") or [{}])[0].get("content", {}).get("text") == "w", "read back")
            proc.kill()
            await proc.wait()
    except Exception as e:
        failures.append(f"{step}: {e!r}")
    timings["total_ms"] = int((time.monotonic() - t0) * 1000)
    print(json.dumps({"failures": failures, "transcript": transcript, "timings": timings}))


asyncio.run(main())
