"""Synthetic data in the exact ReDSM5 layout, for tests and demos (the real set is gated).

Symptom sentences use vocabulary distinctive to their symptom so a small model trained
briefly beats chance; status=0 sentences mention the topic but deny it (hard negatives).
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from hpo.data.redsm5 import (
    ANNOTATION_COLUMNS,
    ANNOTATIONS_FILE,
    POST_COLUMNS,
    POSTS_FILE,
    SPECIAL_CASE,
    SYMPTOMS,
)
from hpo.data.tasks import load_descriptions
from hpo.errors import UsageError

FILLS: dict[str, tuple[str, ...]] = {
    "when": ("lately", "for weeks now", "since the holidays", "this whole month", "all semester"),
    "person": ("my mom", "my partner", "my roommate", "my best friend", "my sister"),
    "hobby": ("gaming", "painting", "guitar", "running", "reading"),
    "meal": ("breakfast", "lunch", "dinner", "a proper meal"),
    "hour": ("2am", "3am", "4am", "5am"),
    "amount": ("five", "ten", "fifteen", "twenty"),
    "place": ("work", "class", "the store", "the gym"),
}

PRESENT: dict[str, tuple[str, ...]] = {
    "DEPRESSED_MOOD": (
        "I feel sad and empty {when}, like a grey cloud follows me around.",
        "Everything feels hopeless and I cry almost every day.",
        "I have been so down {when} that nothing lifts my mood.",
        "There is this heavy sadness in my chest from morning to night.",
        "I cried in the car after {place} again today.",
        "I feel numb and miserable most of the day.",
        "Honestly I just feel hopeless about everything {when}.",
        "My mood is so low that {person} asked if I was okay.",
    ),
    "ANHEDONIA": (
        "I used to love {hobby} but now I feel nothing when I do it.",
        "Nothing is fun anymore, not even {hobby}.",
        "I lost all interest in the things I used to enjoy {when}.",
        "I don't care about {hobby} or anything else these days.",
        "Even hanging out with {person} feels pointless and joyless now.",
        "I stopped enjoying music, movies, everything.",
        "I get zero pleasure out of my hobbies {when}.",
        "People invite me out but I have no interest in going.",
    ),
    "APPETITE_CHANGE": (
        "I have no appetite and keep skipping {meal}.",
        "I lost {amount} pounds without trying {when}.",
        "I keep binge eating junk food at night even when I'm not hungry.",
        "Food tastes like nothing so I barely eat {meal}.",
        "I gained {amount} pounds {when} from stress eating.",
        "My appetite is gone and {person} says I look thinner.",
        "I force myself to eat {meal} but I'm never hungry.",
        "I can't stop snacking and my weight keeps going up.",
    ),
    "SLEEP_ISSUES": (
        "I can't fall asleep until {hour} most nights.",
        "My insomnia is terrible {when}, I lie awake for hours.",
        "I wake up at {hour} and can never get back to sleep.",
        "I sleep twelve hours a day and still want to stay in bed.",
        "I keep waking up in the middle of the night with my mind racing.",
        "Sleep is impossible {when}, I toss and turn until dawn.",
        "I oversleep every day and miss {place} because I can't wake up.",
        "My sleep schedule is wrecked, awake until {hour} again.",
    ),
    "PSYCHOMOTOR": (
        "I feel so restless I can't sit still, I keep pacing around my room.",
        "My body feels slowed down, like I'm moving through mud.",
        "I fidget constantly and can't stop tapping my feet at {place}.",
        "People say I talk and move really slowly {when}.",
        "I'm so agitated that I keep wringing my hands all day.",
        "Everything I do feels sluggish, even walking to {place}.",
        "I can't stop pacing back and forth when I'm at home.",
        "My movements feel slowed and heavy, like my limbs weigh a ton.",
    ),
    "FATIGUE": (
        "I'm exhausted all the time even after a full night in bed.",
        "I have no energy to do anything {when}.",
        "Just taking a shower drains all my energy.",
        "I feel tired and worn out before I even get to {place}.",
        "I'm so fatigued that getting up feels like running a marathon.",
        "My body is drained and exhausted constantly {when}.",
        "I have to nap after {meal} because I'm completely wiped out.",
        "Zero energy, I just lie on the couch feeling exhausted.",
    ),
    "WORTHLESSNESS": (
        "I feel worthless and like a burden to {person}.",
        "Everything is my fault and I hate myself for it.",
        "I feel so guilty all the time, like I ruin everything.",
        "I'm a failure and I don't deserve anyone's kindness.",
        "I keep thinking I'm useless and worthless {when}.",
        "I feel guilty for even existing and taking up space.",
        "No matter what I do at {place} I feel like a total failure.",
        "I blame myself for everything that goes wrong with {person}.",
    ),
    "COGNITIVE_ISSUES": (
        "I can't concentrate at {place}, I read the same line ten times.",
        "My brain feels foggy and I keep forgetting things {when}.",
        "I can't make even simple decisions like what to eat for {meal}.",
        "My focus is gone and I lose track of conversations with {person}.",
        "I'm so indecisive and scatterbrained {when}.",
        "Brain fog makes it impossible to think clearly.",
        "I can't focus long enough to finish a single task.",
        "I forget what I was doing halfway through and can't concentrate.",
    ),
    "SUICIDAL_THOUGHTS": (
        "I keep thinking everyone would be better off if I was dead.",
        "I have thoughts about ending my life {when}.",
        "Sometimes I wish I could just disappear and never wake up.",
        "I've been thinking about suicide more and more.",
        "I wrote a goodbye note to {person} last night.",
        "I don't want to be alive anymore.",
        "I think about killing myself when I'm alone at night.",
        "Death feels like the only way out {when}.",
    ),
}

# Topic mentioned, symptom denied: a clinician would annotate these status=0.
ABSENT: dict[str, tuple[str, ...]] = {
    "DEPRESSED_MOOD": (
        "I wouldn't say I'm sad, just busy {when}.",
        "My mood has actually been okay most days.",
    ),
    "ANHEDONIA": (
        "I still enjoy {hobby} on weekends.",
        "I'm still interested in hanging out with {person}.",
    ),
    "APPETITE_CHANGE": (
        "My appetite is normal and I eat {meal} every day.",
        "My weight hasn't really changed.",
    ),
    "SLEEP_ISSUES": (
        "I sleep fine most nights honestly.",
        "Sleep is the one thing that is still okay for me.",
    ),
    "PSYCHOMOTOR": (
        "I move around normally, nothing feels slowed down.",
        "I'm not restless, I can sit still fine.",
    ),
    "FATIGUE": (
        "My energy is okay, I'm not really tired.",
        "I still have energy for {place} and chores.",
    ),
    "WORTHLESSNESS": (
        "I don't feel guilty, I know it's not my fault.",
        "I know I'm not worthless, I just feel stuck.",
    ),
    "COGNITIVE_ISSUES": (
        "I can still focus at {place} without problems.",
        "My concentration is fine, I'm not forgetting stuff.",
    ),
    "SUICIDAL_THOUGHTS": (
        "I'm not suicidal, I want to get better.",
        "I have never thought about hurting myself.",
    ),
}

SPECIAL = (
    "My doctor thinks this might be grief after losing {person}.",
    "I was recently diagnosed with bipolar disorder.",
    "I think my new meds might be causing some of this.",
)

NEUTRAL = (
    "I went to {place} this morning and it was pretty crowded.",
    "My cat knocked a glass off the table again.",
    "The weather has been rainy and cold {when}.",
    "I started watching a new show on the weekend.",
    "I had coffee with {person} on Saturday.",
    "Our neighbours are renovating their kitchen.",
    "I need to renew my driving licence soon.",
    "The bus was late so I walked part of the way.",
    "I made pasta for {meal} yesterday.",
    "My phone screen cracked last week.",
    "I have an exam on Thursday.",
    "Work has been busy because of the new project.",
    "I moved into a new apartment in the spring.",
    "We visited my grandparents over the long weekend.",
    "I bought a small plant for my desk.",
    "The traffic on the way to {place} was awful.",
    "I'm thinking about learning to cook Thai food.",
    "My laptop keeps running out of battery.",
    "There is a new bakery near my place.",
    "I watched a football match with some friends.",
    "My landlord finally fixed the heating.",
    "I've been listening to a lot of podcasts on my commute.",
    "It's my first time posting here.",
    "Sorry for the long post, I'm on mobile.",
    "Thanks for reading this far.",
)

# Whole posts under ten words, each annotated, so even a one-post sample has an annotation.
SHORT = (
    ("SLEEP_ISSUES", "Can't sleep again."),
    ("DEPRESSED_MOOD", "Feeling so empty today."),
    ("FATIGUE", "Always exhausted, no energy."),
    ("ANHEDONIA", "Nothing feels fun anymore."),
)

Sentence = tuple[str, str | None, int]  # (text, label or None if not annotated, status)


def write_sample(out_dir: str | Path, posts: int = 200, seed: int = 0, typos: bool = False) -> Path:
    """Write ``redsm5_posts.csv`` and ``redsm5_annotations.csv`` into ``out_dir``; return it.

    Byte-identical for the same (posts, seed, typos). ``typos`` writes some labels as
    ``LEEP_ISSUES`` or lower case with spaces, as in public copies, without changing the data.
    """
    if posts < 1:
        raise UsageError(f"posts must be >= 1; got {posts}")
    rng = random.Random(seed)
    # One short and one long post always, so every sample exercises both extremes.
    kinds = [
        "short",
        "long",
        *rng.choices(("regular", "short", "long"), (86, 7, 7), k=max(posts - 2, 0)),
    ]
    kinds = kinds[:posts]
    rng.shuffle(kinds)
    post_rows, annotation_rows = [], []
    for number, kind in enumerate(kinds, 1):
        post_id = f"s_{number:05d}"
        sentences = _sentences(rng, kind)
        post_rows.append((post_id, _join([text for text, _, _ in sentences], rng, kind)))
        for k, (text, label, status) in enumerate(sentences):
            if label is not None:
                row_label = _with_typo(label, len(annotation_rows)) if typos else label
                annotation_rows.append(
                    (post_id, f"{post_id}_{k}", text, row_label, status, _explain(label, status))
                )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / POSTS_FILE, POST_COLUMNS, post_rows)
    _write_csv(out / ANNOTATIONS_FILE, ANNOTATION_COLUMNS, annotation_rows)
    return out


def corpus_sentences() -> list[str]:
    """Every template sentence, filled deterministically, plus the nine descriptions.

    Covers every fill word, so a tokenizer trained on it knows the sample vocabulary.
    """
    templates = [
        t for group in (*PRESENT.values(), *ABSENT.values(), SPECIAL, NEUTRAL) for t in group
    ]
    width = max(len(words) for words in FILLS.values())
    filled = [
        template.format(**{slot: words[i % len(words)] for slot, words in FILLS.items()})
        for template in templates
        for i in range(width)
    ]
    short = [text for _, text in SHORT]
    return list(dict.fromkeys([*filled, *short, *load_descriptions().values()]))


def _fill(template: str, rng: random.Random) -> str:
    return template.format(**{slot: rng.choice(words) for slot, words in FILLS.items()})


def _sentences(rng: random.Random, kind: str) -> list[Sentence]:
    if kind == "short":
        label, text = rng.choice(SHORT)
        return [(text, label, 1)]
    symptoms = rng.sample(SYMPTOMS, rng.choice((0, 0, 1, 1, 2, 2, 3, 4)))
    chosen: list[Sentence] = [
        (_fill(template, rng), symptom, 1)
        for symptom in symptoms
        for template in rng.sample(PRESENT[symptom], rng.randint(1, 2))
    ]
    if rng.random() < 0.3:
        denied = rng.choice([s for s in SYMPTOMS if s not in symptoms])
        chosen.append((_fill(rng.choice(ABSENT[denied]), rng), denied, 0))
    if rng.random() < 0.08:
        chosen.append((_fill(rng.choice(SPECIAL), rng), SPECIAL_CASE, 1))
    fillers = rng.randint(70, 110) if kind == "long" else rng.randint(0 if chosen else 1, 5)
    chosen += [(_fill(rng.choice(NEUTRAL), rng), None, 0) for _ in range(fillers)]
    rng.shuffle(chosen)
    return chosen


def _join(sentences: list[str], rng: random.Random, kind: str) -> str:
    """Spaces mostly, sometimes a newline; long posts get paragraphs every eight sentences."""
    text = sentences[0]
    for k, sentence in enumerate(sentences[1:], 1):
        if kind == "long" and k % 8 == 0:
            separator = "\n\n"
        else:
            separator = "\n" if rng.random() < 0.1 else " "
        text += separator + sentence
    return text


def _with_typo(label: str, row: int) -> str:
    # Decided by row index, not the RNG, so typos=True changes only the labels.
    if label == "SLEEP_ISSUES" and row % 3 == 0:
        return "LEEP_ISSUES"
    if row % 7 == 0:
        return label.lower().replace("_", " ")
    return label


def _explain(label: str, status: int) -> str:
    if label == SPECIAL_CASE:
        return "Relevant context that fits no single criterion."
    topic = label.lower().replace("_", " ")
    return f"Describes {topic}." if status else f"Mentions {topic} but denies it."


def _write_csv(path: Path, header: tuple[str, ...], rows: list[tuple]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
