"""The oracle's data as a run builds it: the source's rows, their activations (extracted, centred), the steering
that injects them and the oracle rows of each split, held in one ``OracleBuild`` the later steps are given."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from ao_calib.steering.activations import layer_indices
from ao_calib.task_api import TaskContext, TaskData

from .activations import Extractor, centered, training_mean
from .config import OracleTaskConfig
from .prompt import placeholder_token_id
from .rows.oracle import Draw, as_dataset, draw, held_out_draws, oracle_rows
from .rows.sources import SourceRows
from .steering import ActivationSteering

log = logging.getLogger(__name__)


@dataclass
class OracleBuild:
    """What ``build_data`` made, for the steps after it: the model and tokenizer it was given (judge=local grades
    with them), the layers read, the extractor (later steps extract with the model they are given), the steering
    (its store grows with later extractions and random-vector rows), the raw training and validation rows and the
    oracle rows of the held-out split."""

    model: object
    tokenizer: object
    layers: list[int]
    extract: Extractor
    steering: ActivationSteering
    train_rows: list[dict]
    validation_rows: list[dict]
    test_rows: list[dict]
    confidences: list[int]
    confidence_instruction: bool

    def draw(self, rng: random.Random) -> Draw:
        return draw(rng, self.layers, self.confidences)

    def rows_of(self, rows: list[dict], draws: list[Draw], fallback: list[dict] = ()) -> list[dict]:
        return oracle_rows(rows, self.steering.store, draws, self.confidence_instruction, fallback=fallback)

    def more_rows(self, rows: list[dict], model, tokenizer, seed: int = 0) -> list[dict]:
        """Oracle rows (with activations extracted by ``model`` into the steering store) for more labelled rows: a
        classification suite, or a calibration split for a recalibration baseline."""
        self.steering.store.update(self.extract({r["prompt"] for r in rows}, model, tokenizer))
        rng = random.Random(seed)
        return self.rows_of(rows, [self.draw(rng) for _ in rows])


def build_oracle_data(config: OracleTaskConfig, context: TaskContext, source: SourceRows,
                      held_out_file: list[dict] | None, data_seed: int, tokenizer, model) -> tuple[OracleBuild,
                                                                                                TaskData]:
    """The run's oracle rows over ``source``'s rows (the held-out split replaced by ``held_out_file`` when set):
    activations extracted at ``task.layer_percents``, each row's layer and warm-up confidence drawn from the data
    seed."""
    train_rows, own_rows = source.train, source.test
    if config.data.max_train_samples:
        train_rows = train_rows[: config.data.max_train_samples]
    test_rows = own_rows if held_out_file is None else held_out_file
    if config.data.withhold_answers:  # (the training rows lost theirs in source_rows)
        test_rows = [{**r, "answer": None} for r in test_rows]
    num_layers = model.config.get_text_config().num_hidden_layers
    if num_layers != context.model.num_hidden_layers:
        log.warning("model.num_hidden_layers=%d but the loaded model has %d; using %d",
                    context.model.num_hidden_layers, num_layers, num_layers)
    layers = layer_indices(num_layers, config.layer_percents)
    extract = Extractor(layers, config.activations, context.cache_dir, context.model.hub_id)
    store = extract({r["prompt"] for r in train_rows + test_rows}, model, tokenizer)
    if config.activations.center:
        # the training mean, per layer, taken off every vector the oracle reads, now and in later extractions
        # (validation, classification suites)
        extract.center = training_mean(store, train_rows, layers)
        store = {aid: centered(vectors, extract.center) for aid, vectors in store.items()}
    steering = ActivationSteering(store, placeholder_token_id(tokenizer), layer=config.injection_layer,
                                  mode=context.model.steering_mode, coefficient=config.steering_coefficient)
    built = OracleBuild(model, tokenizer, layers, extract, steering, train_rows, source.validation, [],
                        list(config.warmup_rows.confidences), config.prompt.confidence_instruction)
    rng = random.Random(data_seed)
    train_draws = [built.draw(rng) for _ in train_rows]
    train = built.rows_of(train_rows, train_draws)
    test_draws = held_out_draws(rng, built.draw, data_seed, train_rows, train_draws, own_rows, test_rows,
                                from_file=held_out_file is not None)
    built.test_rows = built.rows_of(test_rows, test_draws, fallback=train)
    log.info("oracle data: %d train / %d test questions%s over layers %s; activations: %d texts, %d cached",
             len(train), len(built.test_rows),
             f" (task.data.test_path={config.data.test_path})" if config.data.test_path else "", layers,
             extract.stats.texts, extract.stats.cache_hits)
    conditions = (("control",) if config.eval_control else ()) + (("none",) if config.eval_none else ())
    return built, TaskData(train=as_dataset(train), test=as_dataset(built.test_rows),
                           steering=steering, conditions=conditions)
