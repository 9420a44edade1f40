"""A rule-based sentence splitter in MiniSBD's format, so that an Argos package splits
sentences without downloading anything.

Argos Translate splits text into sentences with MiniSBD, whose models are ONNX graphs that
label each character (0: inside a token, 1: token end, 2: sentence end, 3 and 4: the same
for multi-word tokens) from its id in a character vocabulary stored in the model's metadata.
A package that ships no ``minisbd/*.onnx`` makes MiniSBD download one at run time. This
module writes a small graph with the same inputs and outputs that ends a sentence

- after ``.``, ``!``, ``?`` or ``…`` followed by whitespace or the end of the paragraph,
- after the full-width ``。``, ``！``, ``？`` anywhere,

and nowhere else (so "Mr. Smith" is split, "3.5" is not). MiniSBD ends the last sentence
of a paragraph itself. A trained MiniSBD model can replace it (``--splitter``).
Needs ``pip install onnx``.
"""

from __future__ import annotations

import json
from pathlib import Path

# MiniSBD's vocabulary starts with these units (minisbd.modules.vocab)
PAD, UNK, SPACE = "<PAD>", "<UNK>", " "
ENDS_BEFORE_SPACE = (".", "!", "?", "…")
ENDS_ANYWHERE = ("。", "！", "？")
UNITS = [PAD, UNK, SPACE, *ENDS_BEFORE_SPACE, *ENDS_ANYWHERE]
SENTENCE_END = 2  # MiniSBD's label
N_LABELS = 5
OPSET = 17
MINISBD_CONFIG = {  # what minisbd.inference.create_session reads
    "skip_newline": False,
    "max_seqlen": 1000,
    "no_ssplit": False,
    "batch_size": 32,
    "feat_funcs": [],
    "use_dictionary": False,
    "num_dict_feat": 0,
}


def write_splitter(path: str | Path, lang: str) -> Path:
    """Write the rule-based MiniSBD model for language ``lang`` to ``path``."""
    import onnx

    onnx.save(splitter_model(lang), str(path))
    return Path(path)


def splitter_model(lang: str):
    """The ONNX model: ``units`` (B, T) int64 and ``features`` (B, T, F) float in, per-label
    scores (B, T, 5) out."""
    import onnx
    from onnx import TensorProto, helper

    first = UNITS.index(ENDS_BEFORE_SPACE[0])
    anywhere = UNITS.index(ENDS_ANYWHERE[0])

    def const(name: str, values: list[int], dtype=TensorProto.INT64):
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, dtype, [len(values)], values)
        )

    def scalar(name: str, value: int):
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [], [value])
        )

    nodes = [
        const("one_i", [1]),
        const("zero_i", [0]),
        const("last_i", [2**62]),
        const("axis2", [2]),
        scalar("pad", UNITS.index(PAD)),
        scalar("space", UNITS.index(SPACE)),
        scalar("first", first),
        scalar("anywhere", anywhere),
        scalar("past", len(UNITS)),
        # the unit after each one (B, T): units[:, 1:] followed by PAD
        helper.make_node("Slice", ["units", "one_i", "last_i", "one_i"], ["rest"]),
        helper.make_node("Slice", ["units", "zero_i", "one_i", "one_i"], ["first_col"]),
        helper.make_node("Mul", ["first_col", "pad"], ["pad_col"]),
        helper.make_node("Concat", ["rest", "pad_col"], ["next"], axis=1),
        helper.make_node("Equal", ["next", "space"], ["next_space"]),
        helper.make_node("Equal", ["next", "pad"], ["next_pad"]),
        helper.make_node("Or", ["next_space", "next_pad"], ["next_free"]),
        helper.make_node("GreaterOrEqual", ["units", "first"], ["ge_first"]),
        helper.make_node("Less", ["units", "anywhere"], ["lt_anywhere"]),
        helper.make_node("And", ["ge_first", "lt_anywhere"], ["before_space"]),
        helper.make_node("And", ["before_space", "next_free"], ["end_a"]),
        helper.make_node("GreaterOrEqual", ["units", "anywhere"], ["ge_anywhere"]),
        helper.make_node("Less", ["units", "past"], ["lt_past"]),
        helper.make_node("And", ["ge_anywhere", "lt_past"], ["end_b"]),
        helper.make_node("Or", ["end_a", "end_b"], ["end"]),
        helper.make_node("Cast", ["end"], ["end_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["end_f", "axis2"], ["s"]),  # (B, T, 1)
        helper.make_node("Sub", ["s", "s"], ["zeros"]),
        helper.make_node("Not", ["end"], ["inside"]),
        helper.make_node("Cast", ["inside"], ["inside_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["inside_f", "axis2"], ["n"]),
        # labels 0..4: inside, token end, sentence end, and the two multi-word labels
        helper.make_node("Concat", ["n", "zeros", "s", "zeros", "zeros"], ["scores"], axis=2),
    ]
    graph = helper.make_graph(
        nodes,
        "aiayn_sentence_splitter",
        [
            helper.make_tensor_value_info("units", TensorProto.INT64, ["B", "T"]),
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["B", "T", "F"]),
        ],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "T", N_LABELS])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    helper.set_model_props(model, _properties(lang))
    onnx.checker.check_model(model)
    return model


def _properties(lang: str) -> dict[str, str]:
    """What MiniSBD reads from the model's properties: its language, configuration and
    vocabulary of units."""
    vocab = {
        "lang": lang,
        "idx": 0,
        "cutoff": 0,
        "lower": False,
        "_unit2id": {u: i for i, u in enumerate(UNITS)},
        "_id2unit": UNITS,
    }
    return {
        "lang_code": lang,
        "config": json.dumps(MINISBD_CONFIG),
        "vocab": json.dumps(vocab, ensure_ascii=False),
        "lexicon": "null",
    }
