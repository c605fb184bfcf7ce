"""Prometheus metric names: the contract with recording rules, alerts and dashboards (deploy/)."""

from __future__ import annotations

PREFIX = "toolwatch_"
OTHER = "__other__"  # label value for any tool or agent not in the catalog or configuration

# Verdict counters (the source of truth; sum across replicas in PromQL).
TOOL_CALLS = "toolwatch_tool_calls_total"  # {agent,tool,outcome}
JUDGED_CALLS = "toolwatch_judged_calls_total"  # {agent,tool}
EXPECTED_CALLS = "toolwatch_expected_calls_total"  # {agent,tool}
MISSED_CALLS = "toolwatch_missed_calls_total"  # {agent,tool}
TURNS = "toolwatch_turns_total"  # {agent,judged}
TURN_CHECKS = "toolwatch_turn_checks_total"  # {agent,check,result}
SCHEMA_CHECKED_CALLS = "toolwatch_schema_checked_calls_total"  # {agent,tool}
SCHEMA_VIOLATIONS = "toolwatch_schema_violations_total"  # {agent,tool,kind}: one per kind found in a call
SCHEMA_INVALID_CALLS = "toolwatch_schema_invalid_calls_total"  # {agent,tool}: calls with any violation
SCHEMA_VALID_CALLS = "toolwatch_schema_valid_calls_total"  # {agent,tool}: the others (schema adherence numerator)
ARGUMENT_CHECKED_CALLS = "toolwatch_argument_checked_calls_total"  # {agent,tool}
ARGUMENT_MISMATCHES = "toolwatch_argument_mismatches_total"  # {agent,tool}
ARGUMENT_OK_CALLS = "toolwatch_argument_ok_calls_total"  # {agent,tool}: the others (argument correctness numerator)
FORBIDDEN_CALLS = "toolwatch_forbidden_calls_total"  # {agent,tool}
ORDER_VIOLATIONS = "toolwatch_order_violations_total"  # {agent}
CONFUSION = "toolwatch_confusion_total"  # {agent,expected,actual}
RULE_FAILURES = "toolwatch_rule_failures_total"  # {agent,rule}
TURNS_WITH_CALLS = "toolwatch_turns_with_calls_total"  # {agent}: agent turns (not turnless) with a call
TURNLESS_TURNS = "toolwatch_turnless_turns_total"  # {agent}: turnless groups (of TURNS): calls whose turn never came
AGENT_TURNS = "toolwatch_agent_turns_total"  # {agent}: the other TURNS, agent invocations (usage rate denominator)
SEQUENCE_SCORE = "toolwatch_sequence_score_total"  # {agent}
RESPONSE_CHECKED_TURNS = "toolwatch_response_checked_turns_total"  # {agent}

# Rolling-window gauges.
TOOL_CALL_ACCURACY_RATIO = "toolwatch_tool_call_accuracy_ratio"  # {agent,window}
SPURIOUS_CALL_RATIO = "toolwatch_spurious_call_ratio"  # {agent,window}
MISSED_CALL_RATIO = "toolwatch_missed_call_ratio"  # {agent,window}
SELECTION_ACCURACY_RATIO = "toolwatch_selection_accuracy_ratio"  # {agent,window}
END_TO_END_ACCURACY_RATIO = "toolwatch_end_to_end_accuracy_ratio"  # {agent,window}
TOOL_ACCURACY_RATIO = "toolwatch_tool_accuracy_ratio"  # {agent,tool,window}
TOOL_SPURIOUS_CALL_RATIO = "toolwatch_tool_spurious_call_ratio"  # {agent,tool,window}
TOOL_MISSED_CALL_RATIO = "toolwatch_tool_missed_call_ratio"  # {agent,tool,window}

# Operational.
SPANS_RECEIVED = "toolwatch_spans_received_total"  # {transport}
SPANS_REJECTED = "toolwatch_spans_rejected_total"  # {reason}
SPANS_DROPPED = "toolwatch_spans_dropped_total"  # {reason}
# {transport,code}: transport http_protobuf, http_json, http_other (another content type, or a head that does not
# parse) or grpc, by the request's content type (also for a wrong path or method: 404, 405); code the HTTP status, or
# the gRPC status code's number. A serving transport's success and back-pressure codes (200 and 503; 0 and 14) are
# there at 0 from the start, as its toolwatch_spans_received_total.
REQUESTS = "toolwatch_requests_total"
RECEIVER_FAULTS = "toolwatch_receiver_faults_total"  # {transport}: answered 503 / UNAVAILABLE for a fault of ours
CONNECTIONS_REFUSED = "toolwatch_connections_refused_total"  # {listener}: past the connection bound
SPAN_ATTRIBUTES_IGNORED = "toolwatch_span_attributes_ignored_total"  # {attribute}: of the wrong type
PENDING_TURNS = "toolwatch_pending_turns"  # {kind}: turn (turn span arrived), turnless (calls, no turn span yet)
PENDING_BYTES = "toolwatch_pending_bytes"  # estimated weight of the pending records (--max-pending-bytes)
QUEUE_SPANS = "toolwatch_queue_spans"  # records received, waiting for turn assembly (--queue-spans)
QUEUE_BYTES = "toolwatch_queue_bytes"  # their estimated weight (--queue-bytes)
TURNS_EVICTED = "toolwatch_turns_evicted_total"
VERDICT_LOG_LINES_LOST = "toolwatch_verdict_log_lines_lost_total"  # --verdict-log lines not written
JUDGE_DURATION = "toolwatch_judge_duration_seconds"  # histogram
VERDICT_LAG = "toolwatch_verdict_lag_seconds"  # histogram
RULES_RELOADS = "toolwatch_rules_reloads_total"  # {result}
RULES_LAST_RELOAD_SUCCESSFUL = "toolwatch_rules_last_reload_successful"  # 0 while the last reload failed, else 1
ALERT_ACTIVE = "toolwatch_alert_active"  # {alertname,agent,severity}
BUILD_INFO = "toolwatch_build_info"  # {version}: 1 (beside the process_* and python_* metrics of /metrics)

# Label values.
CHECKS = ("selection", "args", "schema", "sequence", "response", "end_to_end", "over_calling")
