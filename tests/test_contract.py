"""bertkit's model classes against transformers' model contract: what a user of stock BERT (or a tool written for
it: Trainer, checkpointing, export) may rely on. Configs are checked when a model is built, not when they are
made; checkpointing is transformers' own per layer; `config.return_dict` is honoured; the default configuration
exports and traces; settings bertkit cannot honour are refused by name, never ignored; and the output switches are
named forward parameters, which is how transformers' tooling finds out that a model can return attentions."""

import inspect
import json

import pytest
import torch
import transformers
from helpers import HEAD_PAIRS, output_tensors, random_batch, tiny_config_kwargs
from transformers.modeling_layers import GradientCheckpointingLayer

import bertkit

pytestmark = pytest.mark.usefixtures("one_thread")

ATOL = 1e-5
HEADS = list(HEAD_PAIRS)


def tiny(head="base", attn="sdpa", **overrides):
    """A tiny bertkit model, dropout 0, seeded; its heads moved off their zero init."""
    torch.manual_seed(0)
    overrides.setdefault("num_labels", 2 if head == "qa" else 3)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                        **overrides), attn_implementation=attn)
    model = HEAD_PAIRS[head][1](config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return model


def stock_twin(model, tmp_path, **config_overrides):
    """The same weights loaded back into bertkit and into stock transformers, both in eval mode."""
    model.save_pretrained(tmp_path)
    head = next(name for name, (_, ours) in HEAD_PAIRS.items() if isinstance(model, ours))
    stock = HEAD_PAIRS[head][0].from_pretrained(tmp_path, **config_overrides).eval()
    ours = type(model).from_pretrained(tmp_path, **config_overrides).eval()
    return stock, ours


# ----------------------------------------------------------------------------------------------------------------
# 1. Configs are validated when the model is built
# ----------------------------------------------------------------------------------------------------------------


def test_config_with_odd_hidden_size_is_accepted_and_the_model_refuses_it():
    config = bertkit.BertkitConfig(hidden_size=32)  # 32 heads of 12? checked at build time, as stock BERT does
    assert transformers.BertConfig(hidden_size=32).hidden_size == config.hidden_size == 32
    with pytest.raises(ValueError, match=r"hidden_size \(32\).*num_attention_heads \(12\)"):
        bertkit.BertkitModel(config)
    with pytest.raises(ValueError, match="num_attention_heads"):
        bertkit.BertkitForSequenceClassification(config)
    bertkit.BertkitModel(bertkit.BertkitConfig(**tiny_config_kwargs(hidden_size=36, num_attention_heads=12)))


def test_default_config_saves_is_edited_and_reloads(tmp_path):
    bertkit.BertkitConfig().save_pretrained(tmp_path)
    config = bertkit.BertkitConfig.from_pretrained(tmp_path)
    config.hidden_size, config.num_hidden_layers, config.num_labels = 32, 2, 5  # 32 is not a multiple of 12
    config.save_pretrained(tmp_path)
    on_disk = json.loads((tmp_path / "config.json").read_text())
    assert on_disk["model_type"] == "bert" and on_disk["hidden_size"] == 32
    for loader in (bertkit.BertkitConfig, transformers.BertConfig, transformers.AutoConfig):
        reloaded = loader.from_pretrained(tmp_path)
        assert (reloaded.hidden_size, reloaded.num_hidden_layers, reloaded.num_labels) == (32, 2, 5)
    reloaded.num_attention_heads = 4  # fixed: now it builds
    assert bertkit.BertkitModel(bertkit.BertkitConfig.from_dict(reloaded.to_dict())).config.hidden_size == 32


# ----------------------------------------------------------------------------------------------------------------
# 2. Gradient (activation) checkpointing: transformers' GradientCheckpointingLayer, every documented switch
# ----------------------------------------------------------------------------------------------------------------

CHECKPOINTING_SWITCHES = {
    "gc-default": ("gradient_checkpointing_enable", {}),
    "gc-nonreentrant": ("gradient_checkpointing_enable", {"gradient_checkpointing_kwargs": {"use_reentrant": False}}),
    "gc-reentrant": ("gradient_checkpointing_enable", {"gradient_checkpointing_kwargs": {"use_reentrant": True}}),
    "ac-default": ("activation_checkpointing_enable", {}),
    "ac-reentrant": ("activation_checkpointing_enable", {"activation_checkpointing_kwargs": {"use_reentrant": True}}),
    "ac-every-2": ("activation_checkpointing_enable", {"every_n_layers": 2}),
    "ac-every-3-reentrant": ("activation_checkpointing_enable",
                             {"every_n_layers": 3, "activation_checkpointing_kwargs": {"use_reentrant": True}}),
    "ac-offload": ("activation_checkpointing_enable", {"offload": True}),
}
# transformers' offload pins host memory, which torch refuses without an accelerator (stock BERT fails the same way)
NEEDS_ACCELERATOR = {"ac-offload"}


def count_layer_runs(model) -> list[int]:
    """Per encoder layer, how many times its attention ran: twice in a step when the layer was checkpointed (the
    backward pass recomputes it). Hooks of modules inside a checkpointed layer fire on the recompute too."""
    counts = [0] * len(model.bert.encoder.layer)
    for number, layer in enumerate(model.bert.encoder.layer):
        layer.attention.register_forward_hook(lambda *_, number=number: counts.__setitem__(number, counts[number] + 1))
    return counts


@pytest.mark.filterwarnings("ignore::FutureWarning")  # gradient_checkpointing_enable is deprecated in 5.x
@pytest.mark.parametrize("unpad", [True, False], ids=["unpadded", "padded"])
@pytest.mark.parametrize("switch", [pytest.param(name, marks=[pytest.mark.gpu] if name in NEEDS_ACCELERATOR else [])
                                    for name in CHECKPOINTING_SWITCHES])
def test_checkpointing_switches_give_the_same_gradients(switch, unpad):
    model = tiny("token", num_hidden_layers=4).train()
    batch = random_batch("token", batch_size=4, seq_len=10, seed=5)  # padded rows of different lengths
    assert not batch["attention_mask"].all()
    assert all(isinstance(layer, GradientCheckpointingLayer) for layer in model.bert.encoder.layer)

    def step():
        model.zero_grad()
        counts = count_layer_runs(model)
        model(**batch, unpad=unpad).loss.backward()
        for layer in model.bert.encoder.layer:
            layer.attention._forward_hooks.clear()
        return counts, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    plain_counts, plain = step()
    method, kwargs = CHECKPOINTING_SWITCHES[switch]
    getattr(model, method)(**kwargs)
    every = kwargs.get("every_n_layers", 1)
    expected = [number % every == 0 for number in range(4)]
    assert [layer.gradient_checkpointing for layer in model.bert.encoder.layer] == expected
    assert model.is_activation_checkpointing
    counts, checkpointed = step()
    assert plain_counts == [1, 1, 1, 1]
    assert counts == [2 if on else 1 for on in expected]
    assert plain.keys() == checkpointed.keys() and len(plain) == len(list(model.parameters()))
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_checkpointing_runs_once_without_backward_and_switches_off():
    model = tiny("sequence", num_hidden_layers=2).train()
    batch = random_batch("sequence", seed=5)
    model.activation_checkpointing_enable()
    counts = count_layer_runs(model)
    with torch.no_grad():
        model(**batch)
    model.eval()
    model(**batch).loss.backward()  # eval mode: nothing is checkpointed
    assert counts == [2, 2]
    model.train()
    model.activation_checkpointing_disable()
    assert not any(layer.gradient_checkpointing for layer in model.bert.encoder.layer)
    model(**batch).loss.backward()
    assert counts == [3, 3]


# ----------------------------------------------------------------------------------------------------------------
# 3. config.return_dict=False gives stock's tuples
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", HEADS)
def test_config_return_dict_false_gives_the_stock_tuple(head, tmp_path):
    stock, ours = stock_twin(tiny(head), tmp_path, return_dict=False)
    assert ours.config.return_dict is False
    batch = random_batch(head, padded=False, num_labels=2 if head == "qa" else 3)  # no padding: every position
    with torch.no_grad():
        expected, actual = stock(**batch), ours(**batch)
        as_dict = ours(**batch, return_dict=True)  # the call overrides the config
    assert isinstance(actual, tuple) and isinstance(expected, tuple)
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, atol=ATOL, rtol=1e-4)
    assert isinstance(as_dict, transformers.utils.ModelOutput)
    for a, d in zip(actual, as_dict.to_tuple()):
        assert torch.equal(a, d)


# ----------------------------------------------------------------------------------------------------------------
# 4. The default configuration (unpad=True) exports, traces and compiles without graph breaks
# ----------------------------------------------------------------------------------------------------------------


def padded_inputs(batch_size=3, seq_len=11, seed=0):
    batch = random_batch("base", batch_size=batch_size, seq_len=seq_len, seed=seed, with_labels=False)
    assert not batch["attention_mask"].all()
    return batch["input_ids"], batch["attention_mask"]


def assert_matches_eager(model, run, input_ids, attention_mask):
    """`run` (a graph) against the eager model: everywhere against the padded path, and at the real tokens against
    the default unpadded path (its padding positions are zeros)."""
    with torch.no_grad():
        graph = output_tensors(run(input_ids, attention_mask))
        padded = output_tensors(model(input_ids, attention_mask=attention_mask, unpad=False))
        default = output_tensors(model(input_ids, attention_mask=attention_mask))
    assert graph.keys() == padded.keys()
    real = attention_mask.bool()
    for name, tensor in padded.items():
        torch.testing.assert_close(graph[name], tensor, atol=ATOL, rtol=1e-4, msg=name)
        per_token = tensor.shape[:2] == real.shape
        torch.testing.assert_close(graph[name][real] if per_token else graph[name],
                                   default[name][real] if per_token else default[name], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("head", ["base", "token", "sequence"])
def test_default_config_exports_with_dynamic_batch_and_length(head):
    model = tiny(head).eval()
    assert model.config.unpad and model.config._attn_implementation == "sdpa"
    input_ids, attention_mask = padded_inputs()
    batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=2, max=64)
    shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    exported = torch.export.export(model, args=(input_ids,), kwargs={"attention_mask": attention_mask},
                                   dynamic_shapes=shapes)
    module = exported.module()
    for inputs in ((input_ids, attention_mask), padded_inputs(batch_size=5, seq_len=17, seed=1)):
        assert_matches_eager(model, lambda ids, mask: module(ids, attention_mask=mask), *inputs)


# torch.jit.trace is deprecated, and transformers' mask code warns while traced
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::torch.jit.TracerWarning")
def test_default_config_jit_traces():
    model = tiny("base").eval()
    input_ids, attention_mask = padded_inputs()
    with torch.no_grad():
        traced = torch.jit.trace(model, (input_ids, attention_mask), strict=False)
    names = ("last_hidden_state", "pooler_output")
    assert_matches_eager(model, lambda ids, mask: dict(zip(names, traced(ids, mask).values())),
                         input_ids, attention_mask)


def test_default_config_compiles_as_one_graph():
    model = tiny("base").eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)  # a data-dependent branch would break it
    assert_matches_eager(model, lambda ids, mask: compiled(ids, attention_mask=mask), *padded_inputs())


def test_default_config_exports_to_onnx():
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")
    model = tiny("base", attn="eager").eval()
    input_ids, attention_mask = padded_inputs()
    batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=2, max=64)
    program = torch.onnx.export(model, (input_ids, attention_mask), dynamo=True,
                                dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString())

    def run(ids, mask):
        outputs = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        return {"last_hidden_state": torch.from_numpy(outputs[0]), "pooler_output": torch.from_numpy(outputs[1])}

    for inputs in ((input_ids, attention_mask), padded_inputs(batch_size=5, seq_len=17, seed=1)):
        assert_matches_eager(model, run, *inputs)


# ----------------------------------------------------------------------------------------------------------------
# 5. Settings are honoured or refused by name
# ----------------------------------------------------------------------------------------------------------------


def count_feed_forward_rows(model) -> list[int]:
    """Rows each call of layer 0's feed-forward saw (its intermediate dense layer's input, flattened)."""
    rows = []
    model.bert.encoder.layer[0].intermediate.register_forward_hook(
        lambda module, args, out: rows.append(args[0].shape[:-1].numel()))
    return rows


@pytest.mark.parametrize("unpad", [True, False], ids=["unpadded", "padded"])
def test_chunked_feed_forward_gives_the_same_outputs(unpad):
    batch = random_batch("token", batch_size=4, seq_len=10, seed=5)
    real_tokens = int(batch["attention_mask"].sum())
    outputs = {}
    for chunk in (0, 3):
        model = tiny("token", chunk_size_feed_forward=chunk).train()
        rows = count_feed_forward_rows(model)
        out = model(**batch, unpad=unpad, output_hidden_states=True)
        out.loss.backward()
        outputs[chunk] = (out, model.bert.encoder.layer[0].output.dense.weight.grad)
        total = real_tokens if unpad else 4 * 10
        if chunk:  # unpadded: chunks of 3 of the N packed tokens; padded: 3 positions of each of the 4 rows
            assert rows == ([min(3, total - start) for start in range(0, total, 3)] if unpad else [12, 12, 12, 4])
        else:
            assert rows == [total]
    (plain, plain_grad), (chunked, chunked_grad) = outputs[0], outputs[3]
    torch.testing.assert_close(chunked.logits, plain.logits, atol=1e-6, rtol=1e-5)
    for a, b in zip(chunked.hidden_states, plain.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(chunked_grad, plain_grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("flag", ["is_decoder", "add_cross_attention"])
@pytest.mark.parametrize("head", ["base", "mlm", "sequence"])
def test_decoder_configs_are_refused_when_the_model_is_built(flag, head):
    config = bertkit.BertkitConfig(**tiny_config_kwargs(**{flag: True}))  # a config may say so (stock's can)
    with pytest.raises(ValueError, match=flag):
        HEAD_PAIRS[head][1](config)


def test_stock_decoder_checkpoint_is_refused(tmp_path):
    config = transformers.BertConfig(**tiny_config_kwargs(is_decoder=True, add_cross_attention=True))
    transformers.BertLMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="is_decoder"):
        bertkit.BertkitForMaskedLM.from_pretrained(tmp_path)


DECODER_INPUTS = {
    "encoder_hidden_states": lambda batch: torch.zeros(*batch["input_ids"].shape[:2], 32),
    "encoder_attention_mask": lambda batch: torch.ones(batch["input_ids"].shape[:2], dtype=torch.long),
    "past_key_values": lambda batch: transformers.DynamicCache(),
    "cache": lambda batch: transformers.DynamicCache(),
    "use_cache": lambda batch: True,
}


@pytest.mark.parametrize("name", list(DECODER_INPUTS))
@pytest.mark.parametrize("head", HEADS)
def test_decoder_inputs_are_refused_at_forward(head, name):
    model = tiny(head).eval()
    batch = random_batch(head, num_labels=2 if head == "qa" else 3)
    with torch.no_grad(), pytest.raises(ValueError, match=name):
        model(**batch, **{name: DECODER_INPUTS[name](batch)})
    with torch.no_grad():
        model(**batch, use_cache=False)  # what an encoder does anyway: accepted


# ----------------------------------------------------------------------------------------------------------------
# 6. Output switches are named parameters; loss kwargs still flow
# ----------------------------------------------------------------------------------------------------------------


def declares_output(forward, name) -> bool:
    """Whether a forward says it takes `name`: as a parameter, or as a key of the TypedDict its **kwargs are
    annotated with (stock transformers 5.x: `**kwargs: Unpack[TransformersKwargs]`)."""
    parameters = inspect.signature(forward).parameters
    if name in parameters:
        return True
    var_keyword = [p.annotation for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    typed = getattr(var_keyword[0], "__args__", ()) if var_keyword else ()
    return any(name in getattr(kind, "__annotations__", {}) for kind in typed)


@pytest.mark.parametrize("head", HEADS)
def test_output_switches_are_named_parameters_and_kwargs_still_reach_the_loss(head, tmp_path):
    stock_class, ours_class = HEAD_PAIRS[head]
    assert declares_output(stock_class.forward, "output_attentions")  # the check itself sees stock's way
    parameters = inspect.signature(ours_class.forward).parameters
    for name in ("output_attentions", "output_hidden_states", "return_dict"):
        assert name in parameters and parameters[name].default is None, name
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())  # Trainer's loss kwargs
    assert getattr(ours_class, "accepts_loss_kwargs", True)
    stock, ours = stock_twin(tiny(head), tmp_path, attn_implementation="eager")
    assert_output_switches_work(stock, ours, random_batch(head, with_labels=False))
    if head not in ("base", "qa"):  # QA's batch has no `labels`: Trainer passes no num_items_in_batch
        assert_num_items_in_batch_reaches_the_loss(head, ours)


def assert_output_switches_work(stock, ours, batch):
    with torch.no_grad():
        expected = stock(**batch, output_attentions=True, output_hidden_states=True)
        actual = ours(**batch, output_attentions=True, output_hidden_states=True)
        ours.config.output_hidden_states = True
        from_config = ours(**batch)
        off = ours(**batch, output_hidden_states=False)
    ours.config.output_hidden_states = False
    assert len(actual.attentions) == len(expected.attentions) == 2
    assert len(actual.hidden_states) == len(from_config.hidden_states) == 3
    for e, a in zip(expected.attentions + expected.hidden_states, actual.attentions + actual.hidden_states):
        torch.testing.assert_close(a, e, atol=ATOL, rtol=1e-4)
    assert off.hidden_states is None and from_config.attentions is None


def assert_num_items_in_batch_reaches_the_loss(head, model):
    """Trainer's `num_items_in_batch` (the step's label count) replaces this batch's count as the denominator."""
    batch = random_batch(head)
    labels = batch["labels"]
    items = int(labels.ne(-100).sum()) if head in ("mlm", "token", "pretraining") else labels.shape[0]
    with torch.no_grad():
        mean = model(**batch).loss
        halved = model(**batch, num_items_in_batch=torch.tensor(2 * items)).loss
    torch.testing.assert_close(halved, mean / 2)
