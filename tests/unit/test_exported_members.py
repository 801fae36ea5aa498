"""The public surface is deliberate: each public module's __all__ is pinned here."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "tokometer.util.errors": ["ConfigError", "DatasetError", "EndpointError", "EngineError", "OutputError", "RunFailed",
                         "StoreError", "TokenizerError", "TokometerError"],
    "tokometer.records": ["ERROR_CATEGORIES", "TOKEN_SOURCES", "ErrorCategory", "FinishReason", "RequestRecord",
                          "ServerTiming", "TokenSource", "classify_http_error", "describe_http_failure"],
    "tokometer.protocols.registry": ["PROTOCOLS", "Protocol", "create_client", "default_api_for_url",
                                     "protocol_named"],
    "tokometer.protocols": ["ProtocolClient", "EventSplitter", "GenerationParams", "HttpRequest", "ParsedEvent",
                            "iter_payloads"],
    "tokometer.prompt": ["Message", "Prompt", "chat_to_text"],
    "tokometer.benchmark": [],
    "tokometer.load": [],
    "tokometer.report": [],
    "tokometer.imports": ["ImportFormatError", "ImportedRun", "TOOLS", "read_import", "save_import"],
    "tokometer.metrics": ["DEFINITIONS", "PERCENTILES", "SLO", "Distribution", "StepSummary", "summarize"],
    "tokometer.datasets": ["FixedSource", "JsonlSource", "PromptSource", "ShareGPTSource",
                           "SyntheticSource", "load_source_file"],
    "tokometer.store": ["EngineIdentity", "ResultStore", "StoredRun", "StoredStep", "configured_store_url",
                        "default_store_url"],
    "tokometer.sim": ["SimConfig", "bind_socket", "create_app", "serve"],
    "tokometer.doctor": ["CHECKS", "DoctorReport", "DoctorSpec", "Finding", "SEVERITIES", "Severity", "Skipped",
                         "run_doctor"],
    "tokometer.quality": ["EvalItem", "QualityResult", "QualitySpec", "Summary", "Verdict", "load_evalset",
                          "run_quality", "summarise"],
    "tokometer.perf": ["BatchEstimate", "Deployment", "Efficiency", "Estimate", "HardwareSpec", "ModelSpec",
                       "decode_step_s", "embedding_pass_s", "estimate", "explain", "hardware_table", "prefill_s",
                       "resolve_hardware", "resolve_model"],
    "tokometer.tokens": ["BaseTokenizer", "ChatCount", "Cost", "FileTokenizer", "HFTokenizer", "ModelPrice",
                         "PriceTable", "ServerTokenizer", "TiktokenTokenizer", "Tokenizer", "count_chat",
                         "count_tokens", "fit_to_budget", "gguf_tokenizer", "load_tokenizer", "max_output_tokens",
                         "parse_messages", "probe_server_tokenizer"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_members(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name} is exported but missing"
