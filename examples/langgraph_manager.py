"""LangGraph recipe: a node before the model hands the manager its sessionwatch notices, each with the exact
delta it names (session_status changesSince), so the model reconciles before acting. `gw` is a Gateway or
a GatewayClient.   python examples/langgraph_manager.py   (needs: pip install -e '.[recipes]')"""

import tempfile

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph

from sessionwatch import Gateway
from sessionwatch.notices import parse_notice


def build(gw, manager: str, model):
    handed = []  # at least once: acknowledged after the model answered with them in view

    def sessionwatch(state: MessagesState) -> dict:
        notes = []
        for entry in gw.peek_system_events(manager):
            handed.append(entry["id"])
            notes.append(entry["line"])
            if named := parse_notice(entry["text"], entry["contextKey"]):
                args = {"sessionKey": named[0], "changesSince": named[1]}
                notes.append(gw.call_tool("session_status", args, caller=manager)["text"])
        return {"messages": [SystemMessage("\n".join(notes))]} if notes else {}

    graph = StateGraph(MessagesState)
    graph.add_node("sessionwatch", sessionwatch)

    def agent(state: MessagesState) -> dict:
        reply = model.invoke(state["messages"])
        if handed:
            gw.ack_system_events(manager, handed)
            handed.clear()
        return {"messages": [reply]}

    graph.add_node("agent", agent)
    graph.add_edge(START, "sessionwatch")
    graph.add_edge("sessionwatch", "agent")
    return graph.compile()


if __name__ == "__main__":
    with Gateway.open(f"sqlite:///{tempfile.mkdtemp()}/recipe.db") as gw:
        gw.put_session("agent:main:main")
        child = gw.call_tool("sessions_spawn", {"label": "researcher"}, caller="agent:main:main")["sessionKey"]
        gw.inbound(child, "Use tenacity, not backoff.", channel="telegram")  # a person steps in
        model = GenericFakeChatModel(messages=iter([AIMessage("Reconciled: switching to tenacity.")]))
        for message in build(gw, "agent:main:main", model).invoke({"messages": [("user", "Next step?")]})["messages"]:
            print(f"[{message.type}] {message.content}")
