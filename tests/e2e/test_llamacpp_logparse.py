"""The buffer lines of a real llama-server log, parsed and checked against the model's own sizes."""

from __future__ import annotations

import gguf

from servelab.engines.llamacpp.logparse import MIB_PRECISION_BYTES, parse_server_log


def _tensor_bytes(path) -> int:
    return sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors)


def test_dense_buffers_match_the_file_and_the_kv_arithmetic(llama_server, model_files):
    server = llama_server(model_files["dense"], "-c", "4096", "-np", "2", "-lv", "4")
    log = parse_server_log(server.log_path.read_text())
    main = log.main
    assert len(log.sections) == 1
    assert abs(main.model_bytes - _tensor_bytes(model_files["dense"])) <= MIB_PRECISION_BYTES
    # 4 layers x 2 KV heads x 32 dims x (K + V) x f16 per token, 4096 cells (2 streams x 2048)
    assert main.kv_bytes == 4096 * 4 * 2 * 32 * 2 * 2
    assert (main.kv_cells, main.kv_layers, main.kv_type_k) == (2048, 4, "f16")
    assert main.context_int("n_ctx") == 4096 and main.context_int("n_ctx_seq") == 2048
    assert main.recurrent_bytes == 0 and main.compute_bytes > 0
    assert (log.n_slots, log.n_ctx_slot) == (2, 2048)


def test_hybrid_with_draft_has_two_sections_and_a_recurrent_state(llama_server, model_files):
    server = llama_server(
        model_files["hybrid"], "-md", str(model_files["draft"]), "-c", "2048", "-np", "1", "-lv", "4"
    )
    log = parse_server_log(server.log_path.read_text())
    target, draft = log.sections
    assert abs(target.model_bytes - _tensor_bytes(model_files["hybrid"])) <= MIB_PRECISION_BYTES
    assert abs(draft.model_bytes - _tensor_bytes(model_files["draft"])) <= MIB_PRECISION_BYTES
    assert target.kv_layers == 2 and target.recurrent_layers == 8  # 2 full-attention layers; RS spans all
    assert target.recurrent_bytes > 0 and draft.recurrent_bytes == 0
    assert target.kv_bytes == 2048 * 2 * 2 * 32 * 2 * 2


def test_a_log_without_buffer_lines_parses_to_nothing():
    log = parse_server_log("srv  llama_server: initializing ...\nsrv  llama_server: model loaded\n")
    assert log.sections == () and log.main.model_bytes == 0 and log.n_slots is None
