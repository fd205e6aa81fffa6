from django.apps import AppConfig


class AgentsMcpConfig(AppConfig):
    name = "agents_mcp"
    verbose_name = "Agents over MCP"
