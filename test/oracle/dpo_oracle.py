"""Oracle test of Twill's DPO (train.objective DPO) against TRL's DPOTrainer
with a PEFT LoRA model, on the cpu in fp32.

    python dpo_oracle.py --bin BUILD/bin --work DIR
                         [--loss sigmoid|ipo|hinge|robust]
                         [--precomputed] [--full] [--pairs N --batch B]
                         [--from-adapter]

A tiny Llama (vocab 97) and 40 preference pairs, pre-tokenized (prompts of
2 to 9 tokens, completions of 1 to 9: some prompt + completion longer than
max_length 12, which both cut keeping the start). The same new LoRA
adapter (rank 4 on q, v and down, as TRL's peft_config starts it: the
reference is the base with the adapter off) is trained by Twill and by TRL
1.16's DPOTrainer
for 10 optimizer steps of 2 micro-batches of 2 pairs each, with warmup,
cosine decay, weight decay and global-norm clipping tight enough to act;
TRL reads the pairs in file order (a sequential sampler) and as they are
(its dataset preparation, which tokenizes text, is skipped: the collator
is its own). Every step's loss and TRL's metrics (rewards/chosen,
/rejected, /margins, logps/chosen, /rejected) must agree within 1e-5
(|twill - trl| / max(1, |trl|)), and the final adapters within 1e-5 (max
abs difference / max abs value). rewards/accuracies counts the pairs whose
chosen reward is ahead; a pair whose rewards are within rounding of each
other may land either way, so a step may differ by one pair, no more.

With --pairs and --batch the epoch is laid out as the Hugging Face Trainer
under TRL lays it: micro-batches of B pairs, the last one short; a step
of 2 of them, the last step what is left (47 pairs of 5: a last step of 5
and 2; 50 of 4: a last step of one micro-batch of 2); each micro-batch's
loss and metrics its mean, a step's their mean over its micro-batches.
Both must take the same steps, with the same figures.

With --from-adapter both start from an adapter already trained (random A
and B, as SFT leaves one): TRL's reference is a frozen copy of it (its
"ref" adapter, for a PeftModel given without a peft_config), Twill's the
model as training starts (dpo.reference PRECOMPUTED, twill-train
--adapter): the first step's policy is its reference.

With --precomputed both compute the reference once over the pairs before
training: Twill's dpo.reference PRECOMPUTED (its @reference pass) and
TRL's precompute_ref_log_probs. With --full (which implies it) both train
the whole model instead of an adapter (TRL without a peft_config): the
final model's every tensor within 1e-5 (its norms' weights trained without
weight decay, as the Hugging Face Trainer under TRL exempts them).
"""
import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from torch.utils.data import SequentialSampler
from transformers import PreTrainedTokenizerFast
from trl import DPOConfig, DPOTrainer

from families import some_projections, tiny_model

VOCAB, MAX_LENGTH, ACCUMULATION = 97, 12, 2
LR, WARMUP, WEIGHT_DECAY, MAX_NORM, BETA = 5e-3, 3, 0.1, 0.5, 0.2
# Robust DPO's chance of a flipped preference (TRL's label_smoothing).
SMOOTHING = {"robust": 0.1}
RANK, ALPHA = 4, 8.0
METRICS = ["loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
           "rewards/margins", "logps/chosen", "logps/rejected"]


def make_pairs(count):
    generator = torch.Generator().manual_seed(5)

    def ids(low, high):
        length = int(torch.randint(low, high + 1, (1,), generator=generator))
        return torch.randint(3, VOCAB, (length,), generator=generator).tolist()

    return [{"prompt_ids": ids(2, 9), "chosen_ids": ids(1, 9),
             "rejected_ids": ids(1, 9)}
            for _ in range(count)]


class InOrderDPOTrainer(DPOTrainer):
    """TRL's trainer on pairs already tokenized, in file order."""

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        return dataset

    def _get_train_sampler(self, *args, **kwargs):
        return SequentialSampler(self.train_dataset)


def word_tokenizer():
    """A tokenizer of VOCAB words: TRL wants one for its pad token."""
    vocab = {f"t{i}": i for i in range(VOCAB)}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="t0")),
        pad_token="t0", eos_token="t2")


def trl_trainer(base, pairs, batch, loss_type, targets, work, precomputed,
                full, started):
    """TRL's trainer of a new LoRA adapter (its peft_config: the reference
    is the base with the adapter off), or of the whole model."""
    args = DPOConfig(
        precompute_ref_log_probs=precomputed,
        output_dir=str(work / "trl"), per_device_train_batch_size=batch,
        gradient_accumulation_steps=ACCUMULATION, num_train_epochs=1,
        learning_rate=LR, lr_scheduler_type="cosine", warmup_steps=WARMUP,
        weight_decay=WEIGHT_DECAY, max_grad_norm=MAX_NORM, optim="adamw_torch",
        adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, beta=BETA,
        loss_type=[loss_type], label_smoothing=SMOOTHING.get(loss_type, 0.0),
        max_length=MAX_LENGTH, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, seed=0,
        dataloader_num_workers=0, bf16=False, fp16=False)
    return InOrderDPOTrainer(
        model=base, args=args, train_dataset=Dataset.from_list(pairs),
        processing_class=word_tokenizer(),
        peft_config=None if full or started else lora_config(targets))


def lora_config(targets, **options):
    return LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0,
                      target_modules=targets, **options)


def trained_adapter(base, targets, work):
    """The base with an adapter as SFT leaves one (random A and B), saved in
    work/start."""
    model = get_peft_model(base, lora_config(targets, init_lora_weights=False))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.mul_(0.5)
    model.save_pretrained(work / "start")
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--loss", choices=["sigmoid", "ipo", "hinge", "robust"],
                        default="sigmoid")
    parser.add_argument("--precomputed", action="store_true")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--from-adapter", action="store_true")
    args = parser.parse_args()
    args.precomputed |= args.full or args.from_adapter
    work = args.work / (f"dpo-{args.loss}"
                        + ("-precomputed" if args.precomputed else "")
                        + ("-full" if args.full else "")
                        + ("-from-adapter" if args.from_adapter else "")
                        + f"-{args.pairs}x{args.batch}")
    # Each step's micro-batches' sizes, as both lay the epoch out.
    sizes = [min(args.batch, args.pairs - start)
             for start in range(0, args.pairs, args.batch)]
    steps = [sizes[i:i + ACCUMULATION]
             for i in range(0, len(sizes), ACCUMULATION)]
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    torch.manual_seed(0)
    base = tiny_model("llama", vocab_size=VOCAB, num_key_value_heads=2)
    base.save_pretrained(work / "base")
    targets = some_projections("llama")
    pairs = make_pairs(args.pairs)
    # TRL's adapter as it starts (A random, B zero) is Twill's start too.
    model = trained_adapter(base, targets, work) if args.from_adapter else base
    trainer = trl_trainer(model, pairs, args.batch, args.loss, targets, work,
                          args.precomputed, args.full, args.from_adapter)
    if not args.full and not args.from_adapter:
        trainer.model.save_pretrained(work / "initial")
    with open(work / "pairs.jsonl", "w") as out:
        for pair in pairs:
            out.write(json.dumps(pair) + "\n")
    modules = "".join(f' target_modules: "{t}"' for t in targets)
    (work / "job.textproto").write_text(f"""
checkpoint {{ base_dir: "{work / 'base'}" output_dir: "{work / 'out'}" }}
{"full_finetune {}" if args.full else
 f"lora {{ rank: {RANK} alpha: {ALPHA}{modules} }}"}
data {{ path: "{work / 'pairs.jsonl'}" format: PREFERENCE shuffle: false }}
dpo {{ loss_type: {args.loss.upper()} beta: {BETA}
       label_smoothing: {SMOOTHING.get(args.loss, 0.0)}
       reference: {"PRECOMPUTED" if args.precomputed else "ADAPTER_OFF"} }}
train {{
  objective: DPO batch_size: {args.batch} seq_len: {MAX_LENGTH}
  gradient_accumulation_steps: {ACCUMULATION} epochs: 1 lr: {LR}
  warmup_steps: {WARMUP} weight_decay: {WEIGHT_DECAY}
  max_grad_norm: {MAX_NORM}
}}
""")
    subprocess.run([args.bin / "twillc", work / "job.textproto", "-o",
                    work / "job.twx"], check=True)
    subprocess.run([args.bin / "twill-train", work / "job.twx"]
                   + ([] if args.full else
                      ["--adapter", work / ("start" if args.from_adapter
                                            else "initial")]),
                   check=True)
    twill = [json.loads(line) for line in
             (work / "out" / "metrics.jsonl").read_text().splitlines()]

    trainer.train()
    trl = [entry for entry in trainer.state.log_history if "loss" in entry]
    ok = len(twill) == len(steps) and len(trl) == len(steps)
    worst, flipped = (0.0, ""), 0.0
    for step, (ours, theirs) in enumerate(zip(twill, trl), start=1):
        for key in METRICS:
            if key == "rewards/accuracies":
                # One pair the other way moves the step's mean by at most
                # 1 / (its micro-batches x the smallest one's pairs).
                layout = steps[step - 1]
                flipped = max(flipped, abs(ours[key] - theirs[key])
                              * len(layout) * min(layout))
                continue
            error = abs(ours[key] - theirs[key]) / max(1.0, abs(theirs[key]))
            worst = max(worst, (error, f"step {step} {key}: {ours[key]} vs "
                                       f"{theirs[key]}"))
    print(f"{args.loss}{' (precomputed)' if args.precomputed else ''}, "
          f"{args.pairs} pairs in micro-batches of {args.batch}: "
          f"{len(twill)} steps of Twill, {len(trl)} of TRL "
          f"({len(steps)} expected); "
          f"worst of {len(METRICS) - 1} figures a step: {worst[0]:.2e} "
          f"({worst[1]})")
    print(f"  TRL's loss {trl[0]['loss']:.6f} -> {trl[-1]['loss']:.6f}, "
          f"rewards/accuracies {trl[-1]['rewards/accuracies']:.2f}")
    print(f"  rewards/accuracies: {flipped:.0f} pair a step the other way "
          f"at most")
    ok = ok and worst[0] <= 1e-5 and flipped <= 1 + 1e-6

    what = "model" if args.full else "adapter"
    saved = load_file(str(work / "out" / ("model.safetensors" if args.full
                                          else "adapter_model.safetensors")))
    trained = {name: parameter.detach() for name, parameter
               in trainer.model.named_parameters()
               if parameter.requires_grad and ".ref." not in name}
    worst_tensor = 0.0
    for name, parameter in trained.items():
        key = name.replace(".default.weight", ".weight")
        if key not in saved:
            print(f"  Twill's {what} lacks {key}")
            ok = False
            continue
        error = ((saved[key] - parameter).abs().max()
                 / parameter.abs().max()).item()
        worst_tensor = max(worst_tensor, error)
    print(f"  final {what}: {len(saved)} tensors, worst {worst_tensor:.2e}")
    ok = ok and worst_tensor <= 1e-5 and len(saved) == len(trained)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
