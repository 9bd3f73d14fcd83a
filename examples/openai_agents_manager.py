"""OpenAI Agents SDK recipe: a model input filter prepends the manager's sessionwatch notices, each with the
exact delta it names (session_status changesSince), so the model reconciles before acting. `gw` is a Gateway
or a GatewayClient.   python examples/openai_agents_manager.py   (pip install -e '.[recipes]')"""

import tempfile

from agents import Agent, RunConfig, Runner
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message

from sessionwatch import Gateway
from sessionwatch.notices import parse_notice


def notices_filter(gw, manager: str):
    handed = []  # at least once: what the last model call was given is acknowledged at the next one

    def prepend_notices(call: CallModelData) -> ModelInputData:
        if handed:
            gw.ack_system_events(manager, handed)
            handed.clear()
        notes = []
        for entry in gw.peek_system_events(manager):
            handed.append(entry["id"])
            notes.append(entry["line"])
            if named := parse_notice(entry["text"], entry["contextKey"]):
                args = {"sessionKey": named[0], "changesSince": named[1]}
                notes.append(gw.call_tool("session_status", args, caller=manager)["text"])
        if not notes:
            return call.model_data
        note = {"role": "developer", "content": "\n".join(notes)}
        return ModelInputData(input=[note, *call.model_data.input], instructions=call.model_data.instructions)

    return prepend_notices


if __name__ == "__main__":
    with Gateway.open(f"sqlite:///{tempfile.mkdtemp()}/recipe.db") as gw:
        gw.put_session("agent:main:main")
        child = gw.call_tool("sessions_spawn", {"label": "researcher"}, caller="agent:main:main")["sessionKey"]
        gw.inbound(child, "Use tenacity, not backoff.", channel="telegram")  # a person steps in
        model = ScriptedModel([[assistant_message("Reconciled: switching to tenacity.")]])
        config = RunConfig(call_model_input_filter=notices_filter(gw, "agent:main:main"), tracing_disabled=True)
        result = Runner.run_sync(Agent(name="manager", model=model), "Next step?", run_config=config)
        print(model.first_call.input[0]["content"])
        print(result.final_output)
