#!/usr/bin/env python3
"""Generate bertkit's small sample datasets under data/.

Everything here was written for this project: the phrase banks, templates, names, facts and
"news" below are original text (no public dataset was copied), and the output is released
under CC0 along with the rest of data/. The files this script writes are committed; the script
documents how they were made and regenerates them byte-identically:

    python data/make_samples.py            # rewrite every dataset, print a summary
    python data/make_samples.py --check    # regenerate in memory and compare with the files on disk

Design notes
------------
* Every dataset uses its own ``random.Random(seed)`` so editing one generator never changes the
  others. Nothing iterates over a ``set`` of strings (string hashing is salted per process).
* Texts are composed from hand-written phrase banks and templates; labels follow from how a text
  was composed (e.g. in "X, but Y" reviews the clause after "but" carries the verdict).
* Train and dev are split from one de-duplicated pool, so no text appears in both.
* CSV files use Python's csv module (RFC-4180 quoting, ``\\n`` line endings, UTF-8, header row);
  JSONL files hold one object per line with ``ensure_ascii=False``.
* Span offsets (Chinese NER, extractive QA) are verified before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------
# Output helpers: every writer renders to a string first, so --check can compare without writing.
# --------------------------------------------------------------------------------------------

OUTPUTS: dict[str, str] = {}  # relative path -> file content
SUMMARY: list[str] = []


def _emit(rel: str, content: str) -> None:
    if rel in OUTPUTS:
        raise RuntimeError(f"{rel} generated twice")
    OUTPUTS[rel] = content


def csv_text(header: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def emit_csv(rel: str, header: list[str], rows: list[list]) -> None:
    for r in rows:
        assert len(r) == len(header), (rel, r)
    _emit(rel, csv_text(header, rows))


def emit_jsonl(rel: str, objs: list[dict]) -> None:
    _emit(rel, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))


def emit_json(rel: str, obj) -> None:
    _emit(rel, json.dumps(obj, ensure_ascii=False, indent=1) + "\n")


def emit_text(rel: str, text: str) -> None:
    _emit(rel, text)


def dist(labels) -> str:
    c = Counter(labels)
    return ", ".join(f"{k}={v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def norm_key(s: str) -> str:
    """Key used for de-duplication: case, punctuation and spacing do not make two texts different."""
    return re.sub(r"[\W_]+", " ", s.lower()).strip()


def pool_unique(make, n: int, rng: random.Random, key=norm_key, max_tries: int = 200000) -> list:
    """Call make(rng) until n items with distinct keys exist (in generation order)."""
    seen: dict[str, None] = {}
    out = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > max_tries:
            raise RuntimeError(f"could only make {len(out)} of {n} unique items")
        item = make(rng)
        if item is None:
            continue
        k = key(item)
        if k in seen:
            continue
        seen[k] = None
        out.append(item)
    return out


def words(s: str) -> int:
    return len(s.split())


def few_per_label(rows: list[list], n: int) -> list[list]:
    """The first `n` rows of each label, in file order: the few-shot recipe's sample (bertkit run fewshot)."""
    seen, out = Counter(), []
    for row in rows:
        if seen[row[1]] < n:
            out.append(row)
            seen[row[1]] += 1
    return out


def pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]


# ============================================================================================
# 1. English sentiment (data/en_sentiment)
# ============================================================================================

EN_SENT_DOMAINS = {
    "products": {
        "items": [
            ("this blender", [
                "it crushes ice in seconds without sounding like a jet engine",
                "my morning smoothies have never been this smooth",
            ], [
                "it leaves chunks of frozen fruit no matter how long it runs",
                "the lid leaked green smoothie all over the counter twice",
            ]),
            ("this pair of wireless headphones", [
                "the sound is crisp and the bass never turns muddy",
                "the noise cancelling makes my commute almost peaceful",
                "the battery easily lasts a full week of office use",
            ], [
                "the left earcup keeps dropping the connection",
                "the battery is empty by lunchtime",
                "they pinch my ears after half an hour",
            ]),
            ("the robot vacuum", [
                "it finds its way around chair legs better than I expected",
                "the floors actually stay clean between my weekend tidy-ups",
            ], [
                "it gets stuck under the sofa every single day",
                "it spreads dust around more than it picks up",
            ]),
            ("this hiking backpack", [
                "the hip belt takes the weight off my shoulders",
                "it kept everything dry through a full day of rain",
            ], [
                "a zip broke on the second trip",
                "the straps dig into my shoulders after an hour",
            ]),
            ("the electric kettle", [
                "it boils a full jug in about two minutes",
                "it switches itself off reliably and the handle stays cool",
            ], [
                "the water tastes of plastic even after a dozen rinses",
                "the lid stopped clicking shut within a month",
            ]),
            ("this office chair", [
                "my lower back stopped aching after the first week",
                "every part adjusts and stays where I put it",
            ], [
                "the seat slowly sinks during the day",
                "it squeaks every time I lean back",
            ]),
            ("this pair of running shoes", [
                "they felt broken in from the very first run",
                "the cushioning is soft without feeling unstable",
            ], [
                "the sole started peeling off after fifty miles",
                "they gave me blisters on every run",
            ]),
        ],
        "pos": [
            "it feels solid and well made",
            "it does exactly what the description promised",
            "it was ready to use straight out of the box",
            "the build quality is far better than the price suggests",
            "it has survived a few drops without a scratch",
            "it is better than the expensive brand I had before",
            "it looks even better in person than in the photos",
            "I use it every day and it still works like new",
            "customer support answered my question within an hour",
            "it arrived early and was packed with care",
        ],
        "neg": [
            "it feels cheap and flimsy",
            "it looks nothing like the photos",
            "it stopped working after two weeks",
            "it arrived in a box that had clearly been opened before",
            "it is worse than the cheap one it replaced",
            "it arrived with a crack along the side",
            "it is much smaller than the listing implied",
            "support kept sending me the same useless template reply",
            "the finish started flaking off within days",
            "it started falling apart the first time I used it properly",
        ],
        "minor_neg": [
            "it is a little pricey",
            "delivery took a few days longer than promised",
            "the colour is slightly darker than in the pictures",
            "the packaging was a bit wasteful",
            "the sizing runs a little small",
        ],
        "minor_pos": [
            "the box it came in was nice",
            "delivery was quick",
            "it looks fine on the shelf",
            "the price seemed reasonable at first",
            "the colour is pretty",
        ],
        "intros": [
            "I bought {item} a month ago",
            "Got {item} as a birthday present",
            "I have been using {item} every day for three weeks",
            "I ordered {item} after reading a lot of reviews",
            "My partner picked {item} up on sale",
            "I replaced my old one with {item}",
        ],
        "vpos": [
            "Would buy again.", "Worth every penny.", "Highly recommended.", "Money well spent.",
            "I already ordered one for my sister.", "Five stars from me.",
        ],
        "vneg": [
            "Save your money.", "Returning it tomorrow.", "Would not buy again.",
            "Complete waste of money.", "I want a refund.", "Avoid.",
        ],
    },
    "films": {
        "items": [
            ("the new heist thriller", [
                "the final twist genuinely caught me off guard",
                "every scene in the vault had me holding my breath",
            ], [
                "you can see the twist coming from the first ten minutes",
                "the heist itself makes no sense once you think about it",
            ]),
            ("that animated film everyone is talking about", [
                "the animation is gorgeous and the jokes work for adults too",
                "my kids laughed and I cried, sometimes in the same scene",
            ], [
                "the jokes are aimed at toddlers and the story at nobody",
                "the songs are forgettable and go on forever",
            ]),
            ("the period drama", [
                "the costumes and sets make every frame look like a painting",
                "the lead gives a quiet, devastating performance",
            ], [
                "it is two and a half hours of people staring out of windows",
                "the romance has no chemistry whatsoever",
            ]),
            ("the sci-fi sequel", [
                "it expands the world without losing what made the first one special",
                "the space battles look incredible on a big screen",
            ], [
                "it throws away everything the first film built up",
                "the effects look unfinished in half the scenes",
            ]),
            ("the documentary about deep-sea fishing", [
                "I learned more in ninety minutes than in a year of reading",
                "the footage from the storms is unforgettable",
            ], [
                "the narrator repeats the same three facts over and over",
                "it feels like a long advert for a fishing company",
            ]),
            ("the romantic comedy", [
                "the two leads are charming and the dialogue is sharp",
                "it is funny, warm and never too sugary",
            ], [
                "every joke lands with a thud",
                "the leads seem to actively dislike each other",
            ]),
        ],
        "pos": [
            "the acting is superb across the whole cast",
            "the soundtrack stayed in my head for days",
            "the pacing is tight and there is not a wasted minute",
            "the script is clever without showing off",
            "the ending is moving and earned",
            "the cinematography is stunning",
            "I was gripped from the opening scene",
            "the characters feel like real people",
            "it made me laugh out loud more than once",
            "I have already recommended it to everyone at work",
        ],
        "neg": [
            "the plot falls apart in the second half",
            "the dialogue is painfully clumsy",
            "I checked my phone every ten minutes",
            "the ending is rushed and makes no sense",
            "the characters are flat and impossible to care about",
            "it drags on for at least forty minutes too long",
            "the acting is wooden from start to finish",
            "half the audience walked out before the end",
            "the jokes are stale and the plot is predictable",
            "the editing is so choppy I lost track of who was who",
        ],
        "minor_neg": [
            "the middle section drags a little",
            "the runtime is on the long side",
            "one subplot goes nowhere",
            "the trailer gives away too much",
            "the cinema was freezing",
        ],
        "minor_pos": [
            "the poster looks great",
            "the opening credits are stylish",
            "the soundtrack has one decent song",
            "the lead actor tries hard",
            "the popcorn was fresh",
        ],
        "intros": [
            "Watched {item} last night",
            "Went to see {item} on opening weekend",
            "Finally caught {item} on streaming",
            "My friends dragged me to {item}",
            "I saw {item} at a late showing",
        ],
        "vpos": [
            "Go and see it.", "Best film I have seen this year.", "I would happily watch it again.",
            "A real gem.", "Absolutely worth the ticket.",
        ],
        "vneg": [
            "Skip it.", "I want those two hours back.", "Wait until it is free, or better, don't bother.",
            "A total letdown.", "Not worth the ticket.",
        ],
    },
    "restaurants": {
        "items": [
            ("the little Italian place on the corner", [
                "the fresh pasta tasted like it came straight from someone's grandmother",
                "the tiramisu alone is worth the trip",
            ], [
                "the pasta was overcooked and swimming in oil",
                "the tiramisu tasted like it had been in the fridge for a week",
            ]),
            ("the new ramen bar", [
                "the broth is rich and the noodles have a perfect bite",
                "the pork belly melts in your mouth",
            ], [
                "the broth was lukewarm and bland",
                "the noodles were soggy by the time they reached the table",
            ]),
            ("the steakhouse downtown", [
                "my steak was cooked exactly the way I asked",
                "the sides were as good as the main course",
            ], [
                "my medium-rare steak arrived grey all the way through",
                "the sides were tiny and stone cold",
            ]),
            ("the vegan cafe near the station", [
                "even my meat-loving dad asked for seconds",
                "every dish was colourful, filling and full of flavour",
            ], [
                "everything tasted like unseasoned cardboard",
                "the portions were tiny for the price",
            ]),
            ("the seafood shack by the harbour", [
                "the fish was so fresh it must have been caught that morning",
                "the chips were crisp and the batter light",
            ], [
                "the fish smelled off and the batter was greasy",
                "the chips were limp and the oysters were gritty",
            ]),
            ("the brunch spot everyone raves about", [
                "the pancakes were fluffy and the coffee was excellent",
                "the eggs benedict was the best I have had in years",
            ], [
                "the pancakes were rubbery and the coffee was bitter",
                "the hollandaise had split and the eggs were hard",
            ]),
        ],
        "pos": [
            "the staff were warm and attentive without hovering",
            "every dish arrived hot and beautifully presented",
            "the portions were generous and the prices fair",
            "the wine list had something for every budget",
            "the atmosphere was cosy and relaxed",
            "our waiter remembered our names by dessert",
            "the food came out quickly even though the room was packed",
            "they happily adapted the menu for my allergy",
            "the flavours were bold but balanced",
            "we left full, happy and already planning our next visit",
        ],
        "neg": [
            "we waited forty minutes just to order",
            "the waiter was rude and clearly wanted us gone",
            "the food arrived cold and the plates were dirty",
            "the bill included a service charge nobody mentioned",
            "the music was so loud we could not hear each other",
            "they got three of our four orders wrong",
            "the table was sticky and the cutlery was stained",
            "the kitchen ran out of half the menu by eight",
            "everything was drowning in salt",
            "I was ill for two days afterwards",
        ],
        "minor_neg": [
            "the wait for a table was a bit long",
            "parking nearby is a pain",
            "it is quite noisy on weekends",
            "the menu is rather short",
            "dessert was nothing special",
        ],
        "minor_pos": [
            "the decor is lovely",
            "the location is convenient",
            "the bread basket was decent",
            "the host greeted us with a smile",
            "the menu looked exciting",
        ],
        "intros": [
            "We had dinner at {item} on Friday",
            "Stopped at {item} for a quick lunch",
            "Booked {item} for our anniversary",
            "Took my parents to {item}",
            "Tried {item} for the first time",
        ],
        "vpos": [
            "We will definitely be back.", "Book a table, you won't regret it.", "Our new favourite spot.",
            "Five stars.", "Can't wait to go back.",
        ],
        "vneg": [
            "Never again.", "We won't be going back.", "Eat anywhere else.",
            "One star, and that's generous.", "Avoid.",
        ],
    },
    "hotels": {
        "items": [
            ("the beachfront resort", [
                "we woke up to the sound of waves every morning",
                "the pool area was spotless and never crowded",
            ], [
                "the pool was green and the sun loungers were broken",
                "the so-called sea view was a car park with a strip of water",
            ]),
            ("the boutique hotel in the old town", [
                "our room was full of character and beautifully decorated",
                "the rooftop terrace has the best view in the city",
            ], [
                "the room was so cramped we had to take turns standing",
                "the rooftop bar kept us awake until three",
            ]),
            ("the airport hotel", [
                "the shuttle ran on time and the room was quiet despite the planes",
                "it was exactly what we needed before an early flight",
            ], [
                "the shuttle never turned up and we nearly missed our flight",
                "we could hear every single plane take off",
            ]),
            ("the mountain lodge", [
                "the fireplace and the view made it feel like a postcard",
                "the hiking trails start right from the front door",
            ], [
                "the heating broke and nobody came to fix it",
                "the lodge smelled of damp and old smoke",
            ]),
            ("the business hotel near the convention centre", [
                "the desk, the wifi and the coffee were all excellent",
                "check-in took two minutes even at rush hour",
            ], [
                "the wifi dropped every few minutes during my calls",
                "check-in took over an hour",
            ]),
        ],
        "pos": [
            "the bed was incredibly comfortable",
            "the room was spotless and smelled fresh",
            "the staff went out of their way to help",
            "breakfast had a huge choice and everything was fresh",
            "they upgraded our room without us even asking",
            "the location is perfect for exploring on foot",
            "the shower had great pressure and plenty of hot water",
            "it was quiet at night and we slept like babies",
            "the concierge's restaurant tips were all spot on",
            "late checkout was no problem at all",
        ],
        "neg": [
            "the sheets had stains on them",
            "there was hair in the shower and dust everywhere",
            "the air conditioning rattled all night",
            "reception lost our booking and shrugged",
            "breakfast was stale bread and watery coffee",
            "the walls were so thin we heard every word next door",
            "they charged us twice and took weeks to refund it",
            "the photos online must be ten years old",
            "the lift was broken for our entire stay",
            "we found bed bugs on the second night",
        ],
        "minor_neg": [
            "the room was a little small",
            "parking costs extra",
            "the gym is tiny",
            "breakfast ends rather early",
            "the lift is slow",
        ],
        "minor_pos": [
            "the lobby looks impressive",
            "the location is central",
            "the receptionist was polite",
            "the toiletries smelled nice",
            "the price was low",
        ],
        "intros": [
            "Stayed at {item} for three nights",
            "We spent a long weekend at {item}",
            "Booked {item} for a work trip",
            "We picked {item} for our honeymoon",
            "I spent one night at {item}",
        ],
        "vpos": [
            "Would stay again in a heartbeat.", "Can't recommend it enough.", "We are already planning a return visit.",
            "Great value.", "Five stars.",
        ],
        "vneg": [
            "Stay somewhere else.", "Never again.", "Not worth half the price.",
            "We checked out a day early.", "Avoid at all costs.",
        ],
    },
    "apps": {
        "items": [
            ("this budgeting app", [
                "I finally know where my money goes each month",
                "linking my bank accounts took less than a minute",
            ], [
                "it keeps miscategorising my rent as entertainment",
                "my bank connection breaks every few days",
            ]),
            ("the language learning app", [
                "the daily lessons are short enough that I never skip them",
                "I held a real conversation in Spanish after two months",
            ], [
                "the lessons repeat the same ten words for weeks",
                "it nags me with notifications all day",
            ]),
            ("the new photo editor", [
                "the one-tap filters look natural instead of fake",
                "it exports full resolution without a watermark",
            ], [
                "it crashes every time I try to export",
                "every useful tool is locked behind a subscription",
            ]),
            ("this meditation app", [
                "the sleep stories actually put me to sleep",
                "the guided sessions helped me through a stressful month",
            ], [
                "the narrator's voice is more irritating than calming",
                "it asks me to rate it in the middle of a session",
            ]),
            ("the food delivery app", [
                "tracking is accurate to the minute",
                "refunds for missing items are instant",
            ], [
                "the tracking map shows the rider in another city",
                "getting a refund for a missing meal took nine emails",
            ]),
            ("the fitness tracker app", [
                "syncing with my watch is instant and reliable",
                "the weekly summaries keep me motivated",
            ], [
                "it loses my workouts about half the time",
                "the step count is wildly off",
            ]),
        ],
        "pos": [
            "the interface is clean and easy to learn",
            "it runs smoothly even on my old phone",
            "the latest update fixed every bug I had reported",
            "it syncs across my devices without any fuss",
            "the free version is genuinely useful",
            "there are no annoying ads",
            "the developers actually reply to feedback",
            "it uses barely any battery",
            "it has become part of my daily routine",
            "everything I need is one tap away",
        ],
        "neg": [
            "it crashes constantly",
            "the latest update deleted all my data",
            "there is an advert after every single tap",
            "it drains my battery in a couple of hours",
            "the subscription renewed without any warning",
            "it logs me out every time I close it",
            "the menus are a confusing maze",
            "support never answered any of my emails",
            "it freezes whenever I open the settings",
            "half the features advertised do not exist",
        ],
        "minor_neg": [
            "the dark mode is a bit too dark",
            "it took a day to get used to the layout",
            "the icon is ugly",
            "the premium tier is a little expensive",
            "there are a few too many notifications",
        ],
        "minor_pos": [
            "the icon is cute",
            "the onboarding screens are pretty",
            "the colour scheme is nice",
            "it installed quickly",
            "the idea behind it is good",
        ],
        "intros": [
            "I have used {item} for a few months",
            "Downloaded {item} after a friend suggested it",
            "Switched to {item} from a competitor",
            "I gave {item} a try last week",
            "My team started using {item} at work",
        ],
        "vpos": [
            "Worth the subscription.", "Five stars.", "Easily the best app in its category.",
            "I recommend it to everyone.", "Keep up the good work, developers.",
        ],
        "vneg": [
            "Uninstalled.", "Deleting it today.", "One star.",
            "Do not waste your time.", "Back to my old app.",
        ],
    },
    "books": {
        "items": [
            ("the new mystery novel", [
                "I stayed up until two because I had to know who did it",
                "the clues are all there and the solution is still a surprise",
            ], [
                "I guessed the killer by chapter three",
                "the solution relies on a clue the reader never sees",
            ]),
            ("this fantasy trilogy", [
                "the world building is rich without being overwhelming",
                "the magic system is original and has real costs",
            ], [
                "the first hundred pages are nothing but invented names",
                "the magic can apparently do whatever the plot needs",
            ]),
            ("the memoir by the retired surgeon", [
                "it is honest, funny and surprisingly tender",
                "the chapters about her first years as a doctor are gripping",
            ], [
                "it reads like a list of everyone the author ever disagreed with",
                "every chapter ends with the same self-congratulation",
            ]),
            ("the popular self-help book", [
                "the advice is practical and I have already used some of it",
                "it is short, clear and free of fluff",
            ], [
                "it takes three hundred pages to say what fits on a postcard",
                "the advice boils down to simply being rich already",
            ]),
            ("the history of the spice trade", [
                "it makes a dry subject feel like an adventure story",
                "the research is impressive but never heavy",
            ], [
                "it is a dense wall of dates and names",
                "the author gets basic facts wrong",
            ]),
        ],
        "pos": [
            "the writing is beautiful",
            "I could not put it down",
            "the characters stayed with me long after the last page",
            "every chapter ends on a hook",
            "the prose is clear and elegant",
            "it made me laugh and cry in equal measure",
            "I have already bought copies for two friends",
            "the ending is perfect",
            "it is the best thing I have read this year",
            "the audiobook narrator is brilliant too",
        ],
        "neg": [
            "the writing is clumsy and repetitive",
            "I gave up halfway through",
            "the characters are cardboard cut-outs",
            "the ending just stops mid-scene",
            "it badly needed an editor",
            "the plot meanders without going anywhere",
            "I kept falling asleep after a few pages",
            "the print edition is full of typos",
            "it is a chore to read",
            "the hype is completely undeserved",
        ],
        "minor_neg": [
            "the opening chapter is slow",
            "the cover is a bit dull",
            "it is longer than it needs to be",
            "the map at the front is hard to read",
            "the hardback is heavy to carry around",
        ],
        "minor_pos": [
            "the cover is gorgeous",
            "the first page is promising",
            "the premise sounds great",
            "the paper quality is nice",
            "the author clearly did research",
        ],
        "intros": [
            "Just finished {item}",
            "Read {item} for my book club",
            "Picked up {item} at the airport",
            "I borrowed {item} from the library",
            "Listened to {item} on my commute",
        ],
        "vpos": [
            "A must-read.", "Five stars.", "I will read everything this author writes.",
            "Highly recommended.", "Go and buy it now.",
        ],
        "vneg": [
            "Not recommended.", "Donated it the next day.", "Two stars at most.",
            "Skip this one.", "What a waste of paper.",
        ],
    },
    "services": {
        "items": [
            ("the emergency plumber", [
                "they found the leak in minutes and charged exactly what they quoted",
                "they cleaned up after themselves and explained everything",
            ], [
                "they turned up three hours late and left the leak worse",
                "the final bill was double the quote",
            ]),
            ("the moving company", [
                "the crew packed our whole flat in a morning without breaking a thing",
                "they carried a piano up four flights without a scratch",
            ], [
                "they broke our mirror and denied it",
                "half our boxes arrived a week late",
            ]),
            ("the bank's customer service line", [
                "a real person picked up within two minutes",
                "they sorted out a fraudulent charge the same day",
            ], [
                "I was on hold for ninety minutes",
                "they closed my account by mistake and could not explain why",
            ]),
            ("the airline", [
                "the crew were lovely and we landed early",
                "they rebooked us onto a better flight at no cost",
            ], [
                "they lost my suitcase and never called back",
                "the flight was cancelled with two hours' notice",
            ]),
            ("the hairdresser on the high street", [
                "she listened to what I wanted and nailed it",
                "it is the best haircut I have had in years",
            ], [
                "she ignored everything I asked for",
                "I went in for a trim and came out nearly bald",
            ]),
            ("the local gym", [
                "the equipment is new and always clean",
                "the trainers are friendly and actually know what they are doing",
            ], [
                "half the machines have had out-of-order signs for months",
                "cancelling my membership took five phone calls",
            ]),
            ("the car repair shop", [
                "they fixed the problem the dealer had missed twice",
                "they called before doing any extra work",
            ], [
                "the warning light came back on before I got home",
                "they charged me for parts they never replaced",
            ]),
        ],
        "pos": [
            "they were on time, professional and friendly",
            "the price was fair and there were no hidden fees",
            "they kept me updated at every step",
            "the whole thing took half the time I expected",
            "they treated my home with real respect",
            "they followed up a week later to check everything was fine",
            "I felt genuinely looked after",
            "communication was quick and clear",
            "they solved a problem two other companies could not",
            "booking was easy and they arrived exactly when promised",
        ],
        "neg": [
            "nobody returned my calls",
            "they were rude from the first minute",
            "the job was done badly and had to be redone",
            "they added fees that were never mentioned",
            "they cancelled twice on the day",
            "I was passed between five departments",
            "they promised a callback that never came",
            "they left a mess everywhere",
            "the manager was dismissive when I complained",
            "it took a month to fix something that should take a day",
        ],
        "minor_neg": [
            "booking online was a bit clunky",
            "they are not the cheapest",
            "the waiting room could use a refresh",
            "the first appointment was a week away",
            "their website is outdated",
        ],
        "minor_pos": [
            "the website looks professional",
            "the receptionist was pleasant",
            "the quote arrived quickly",
            "the van was clean",
            "the office is easy to find",
        ],
        "intros": [
            "We used {item} last week",
            "I dealt with {item} for the first time this month",
            "I have used {item} twice now",
            "My neighbour recommended {item}",
            "Had to contact {item} on Monday",
        ],
        "vpos": [
            "Highly recommended.", "I will use them again.", "Five stars, well deserved.",
            "Cannot fault them.", "I have already told all my friends.",
        ],
        "vneg": [
            "Avoid them.", "Never again.", "Find someone else.",
            "Zero stars if I could.", "I have filed a complaint.",
        ],
    },
}

# Polarity-reversing and hedged phrasings (negation: "not bad at all" is positive).
EN_NEGATED_POS = [
    "Not bad at all.", "Honestly, no complaints whatsoever.", "I can't find a single thing to complain about.",
    "Never once disappointed.", "I couldn't be happier.", "I was not disappointed.", "Nothing to dislike here.",
    "I can't fault it.", "Not a single regret.", "Didn't expect much, but it won me over.",
    "I have no idea why it gets bad reviews.", "It never lets me down.",
]
EN_NEGATED_NEG = [
    "Not worth the money.", "I would not recommend it to anyone.", "Not even close to what was advertised.",
    "Nothing special at all.", "I couldn't wait for it to end.", "Not good enough, not by a long way.",
    "I won't be coming back.", "Not impressed.", "Never again, not even if it were free.",
    "It doesn't live up to the hype.", "I can't think of one thing I liked.", "Not what I paid for.",
]
EN_OPENERS = ["", "", "", "", "Honestly, ", "I have to say ", "Overall, ", "In short, ", "Simply put, ",
              "Frankly, "]
EN_SHORT_POS = [
    "Absolutely loved it, would buy again.", "Better than I hoped, genuinely.", "Five stars, no hesitation at all.",
    "This exceeded every expectation I had.", "Brilliant from start to finish.", "Lovely experience, thank you so much.",
    "Exactly what I needed, and more.", "Can't recommend this highly enough.", "Pleasantly surprised in every way.",
    "Really impressed, it just works.", "A delight, start to finish.", "Wonderful, will definitely return.",
]
EN_SHORT_NEG = [
    "Total waste of money, sadly.", "Worse than I feared, honestly.", "One star, and that is generous.",
    "This fell apart in a week.", "Awful from start to finish.", "Disappointing experience, never again.",
    "Nothing like what was promised.", "Would not recommend to my enemies.", "Frustrating in every possible way.",
    "Really let down, it barely works.", "A mess, start to finish.", "Terrible, will not return.",
]
# Mild sarcasm (used sparingly): the literal words are positive, the review is negative.
EN_SARCASM = [
    "Oh great, another update that logs me out every hour. Just what I always wanted.",
    "Wonderful. It broke the day after the warranty ran out. Truly impressive timing.",
    "Loved waiting fifty minutes for a cold burger. Really the highlight of my week.",
    "Fantastic, the 'sea view' room faces the bins. Five stars for imagination.",
    "What a thrilling film, I only fell asleep twice.",
    "Brilliant customer service: three calls, three different answers, zero solutions.",
    "Great book if you need help falling asleep.",
    "Amazing battery, lasts almost until lunchtime.",
    "Sure, paying extra for 'express' delivery that took two weeks was a great idea.",
    "So glad I spent my whole weekend assembling a wardrobe that doesn't close.",
    "The hotel's 'quiet location' is right above a nightclub. Lovely.",
    "Nothing says premium like a phone case that cracks on its first fall.",
]
EN_EXPECT_NEG = [
    "I wanted to love {item}, but {n}.",
    "I had high hopes for {item}. Unfortunately, {n}.",
    "Everyone raved about {item}, so I was excited. Sadly, {n}.",
    "I really tried to like {item}, but {n}, and {n2}.",
    "On paper {item} sounded perfect. In reality {n}.",
    "I expected great things from {item}, yet {n}.",
]
EN_EXPECT_POS = [
    "I expected very little from {item}, but {p}.",
    "I was ready to hate {item}, but {p}.",
    "I was sceptical about {item} at first. Now {p}, and {p2}.",
    "My expectations for {item} were low. I was wrong: {p}.",
    "I almost gave up on {item} early on, and I am glad I didn't, because {p}.",
    "Despite the mixed reviews, {item} won me over: {p}.",
]


_EN_STOP = {"about", "after", "their", "there", "every", "which", "would", "could", "first", "being",
            "three", "minutes", "never", "without", "really", "whole", "things", "thing"}


def en_clash(a: str, b: str) -> bool:
    """True when two clauses talk about the same thing (e.g. the battery), so conceding one while
    praising the other would contradict itself."""
    wa = {w for w in re.findall(r"[a-z]{5,}", a.lower()) if w not in _EN_STOP}
    wb = {w for w in re.findall(r"[a-z]{5,}", b.lower()) if w not in _EN_STOP}
    return bool(wa & wb)


_ZH_STOP = {"一点", "没有", "一个", "时候", "的时", "很好", "不是", "我们", "什么", "可以", "还是", "就是", "一直"}


def zh_clash(a: str, b: str) -> bool:
    ba = {a[i:i + 2] for i in range(len(a) - 1)} - _ZH_STOP
    bb = {b[i:i + 2] for i in range(len(b) - 1)} - _ZH_STOP
    return bool(ba & bb)


def _en_sent_review(rng: random.Random, label: str) -> str:
    dom = EN_SENT_DOMAINS[pick(rng, list(EN_SENT_DOMAINS))]
    item, ipos, ineg = pick(rng, dom["items"])
    pos_pool = ipos + ipos + dom["pos"]  # item-specific aspects come up a little more often
    neg_pool = ineg + ineg + dom["neg"]
    good = pos_pool if label == "positive" else neg_pool
    minor_other = dom["minor_neg"] if label == "positive" else dom["minor_pos"]
    verdicts = dom["vpos"] if label == "positive" else dom["vneg"]
    negated = EN_NEGATED_POS if label == "positive" else EN_NEGATED_NEG
    shorts = EN_SHORT_POS if label == "positive" else EN_SHORT_NEG
    expect = EN_EXPECT_POS if label == "positive" else EN_EXPECT_NEG

    def two(pool):
        a = pick(rng, pool)
        b = pick(rng, pool)
        while b == a:
            b = pick(rng, pool)
        return a, b

    g1, g2 = two(good)
    intro = pick(rng, dom["intros"]).format(item=item)
    opener = pick(rng, EN_OPENERS)
    v = pick(rng, verdicts)
    r = rng.random()
    if label == "negative" and r < 0.04:
        return pick(rng, EN_SARCASM)
    if r < 0.08:
        return pick(rng, shorts)
    if r < 0.22:  # intro + two aspects + verdict
        return f"{intro}. {opener}{g1}, and {g2}. {v}" if opener else f"{intro}. {cap(g1)}, and {g2}. {v}"
    if r < 0.34:  # intro, aspect, verdict
        return f"{intro}, and {g1}. {v}"
    if r < 0.50:  # contrast: minor point on the other side, then the verdict side
        m = pick(rng, minor_other)
        tail = "" if rng.random() < 0.4 else " " + v
        conj = pick(rng, [", but", ", but honestly", "; however,", ", yet", ", but in the end"])
        return f"{cap(m)}{conj} {g1}.{tail}"
    if r < 0.62:  # expectation reversal ("I wanted to love it, but ...")
        t = pick(rng, expect)
        return cap(t.format(item=item, n=g1, n2=g2, p=g1, p2=g2))
    if r < 0.74:  # negated / hedged phrase + supporting aspect
        ng = pick(rng, negated)
        if rng.random() < 0.5:
            return f"{ng} {cap(g1)}."
        return f"{intro}. {ng} {cap(g1)}, and {g2}."
    if r < 0.84:  # concede a minor point on the other side, then the dominant side wins
        b1 = pick(rng, minor_other)
        for _ in range(20):
            if not (en_clash(b1, g1) or en_clash(b1, g2)):
                break
            b1 = pick(rng, minor_other)
        frames = [
            "Sure, {b}. Still, {g}, and {g2}. {v}",
            "Yes, {b}, but {g} and {g2}. {v}",
            "{intro}. Although {b}, {g}. {v}",
            "{intro}. I'll admit {b}; even so, {g}, and {g2}. {v}",
        ]
        return pick(rng, frames).format(b=b1, g=g1, g2=g2, v=v, intro=intro)
    if r < 0.92:  # long review
        g3 = pick(rng, good)
        while g3 in (g1, g2):
            g3 = pick(rng, good)
        m = pick(rng, minor_other)
        aside = ("The only thing I would mention is that {m}." if label == "positive"
                 else "The only good thing I can say is that {m}.").format(m=m)
        first = f"{opener}{g1}" if opener else cap(g1)
        return f"{intro}. {first}. {cap(g2)}, and {g3}. {aside} {v}"
    # aspect only, terse
    return f"{cap(g1)}. {v}"


def make_en_sentiment() -> None:
    rng = random.Random(1001)
    by_label = {}
    for lab in ("positive", "negative"):
        def mk(r, lab=lab):
            t = _en_sent_review(r, lab)
            t = re.sub(r"\s+", " ", t).strip()
            return t if 5 <= words(t) <= 60 else None
        by_label[lab] = pool_unique(mk, 260, rng)
    # The pool is de-duplicated, so no review appears in both train and dev.
    train, dev = [], []
    for lab in ("positive", "negative"):
        rows = by_label[lab]
        train += [[t, lab] for t in rows[:200]]
        dev += [[t, lab] for t in rows[200:260]]
    rng.shuffle(train)
    rng.shuffle(dev)
    emit_csv("en_sentiment/train.csv", ["text", "label"], train)
    emit_csv("en_sentiment/dev.csv", ["text", "label"], dev)
    emit_csv("en_sentiment/fewshot_train.csv", ["text", "label"], few_per_label(train, 8))
    for name, rows in (("train", train), ("dev", dev)):
        wl = [words(r[0]) for r in rows]
        SUMMARY.append(f"en_sentiment/{name}.csv: {len(rows)} rows ({dist(r[1] for r in rows)}); "
                       f"words {min(wl)}-{max(wl)}")


# ============================================================================================
# 2. Chinese sentiment (data/zh_sentiment)
# ============================================================================================

ZH_SENT_DOMAINS = {
    "外卖": {
        "items": [
            ("这家麻辣烫", ["汤底很香，麻辣味正好", "食材都很新鲜，丸子也很有嚼劲"],
             ["汤底一股味精味", "菜叶都是蔫的，丸子还是冻着的"]),
            ("这家黄焖鸡", ["鸡肉炖得很烂，汤汁拌饭特别香", "土豆软糯入味"],
             ["鸡肉全是骨头，没几块肉", "汤汁又咸又油"]),
            ("楼下那家披萨", ["饼底酥脆，芝士拉丝很长", "料放得很足，一点都不小气"],
             ["饼底又硬又干", "芝士少得可怜，几乎看不到馅料"]),
            ("这家轻食沙拉", ["蔬菜很脆，酱汁清爽不腻", "鸡胸肉一点都不柴"],
             ["生菜都发黄了", "鸡胸肉柴得咬不动"]),
            ("这家烧烤", ["烤串火候刚好，外焦里嫩", "羊肉串没有一点膻味"],
             ["烤串都烤糊了", "羊肉串膻味很重"]),
            ("这家奶茶", ["茶味很浓，甜度刚刚好", "珍珠软糯有嚼劲"],
             ["甜得发腻，根本喝不出茶味", "珍珠硬得像石头"]),
        ],
        "pos": ["送餐速度很快，半小时就到了", "包装很严实，一点都没洒", "分量很足，两个人都吃不完", "味道很正宗",
                "骑手小哥态度特别好", "价格实惠，性价比很高", "还贴心地送了一瓶饮料", "备注的要求都照做了",
                "送到的时候还是热乎的", "餐盒干净，看着就有食欲"],
        "neg": ["等了一个半小时才送到", "汤洒了一袋子", "送到的时候菜都凉透了", "分量少得可怜", "吃出了一根头发",
                "味道太咸了，根本没法下口", "备注不要香菜还是放了一大把", "少送了一份米饭，打电话也没人接",
                "吃完肚子疼了一晚上", "骑手态度很差，还让我自己下楼拿"],
        "minor_neg": ["配送费有点贵", "餐盒有点简陋", "高峰期送得稍微慢了点", "辣度比我想的重一点"],
        "minor_pos": ["包装看着还行", "价格倒是便宜", "送得还算准时", "餐盒挺干净的"],
        "intros": ["中午点了{item}", "加班的时候点了{item}", "第二次点{item}了", "看评分挺高就点了{item}",
                   "周末在家点了{item}"],
        "vpos": ["下次还会再点", "五星好评", "强烈推荐", "已经收藏店铺了", "会一直回购的"],
        "vneg": ["再也不会点了", "差评", "不推荐", "已经申请退款了", "拉黑了"],
    },
    "酒店": {
        "items": [
            ("海边这家民宿", ["推开窗就能看到海", "老板很热情，还推荐了好几家本地小吃"],
             ["说好的海景房只能看到一堵墙", "老板态度很冷淡，问什么都不耐烦"]),
            ("机场附近的这家酒店", ["接送机很准时", "赶早班机住这里特别方便"],
             ["接机的车等了一个小时都没来", "飞机起降的声音吵得根本睡不着"]),
            ("市中心的这家快捷酒店", ["出门就是地铁站，去哪儿都方便", "价格不贵，房间却很干净"],
             ["房间小得连箱子都打不开", "价格不便宜，房间却又旧又脏"]),
            ("古镇里的这家客栈", ["院子布置得很有味道", "早上在露台喝茶特别惬意"],
             ["院子里的酒吧一直吵到凌晨", "房间潮得被子都是湿的"]),
            ("这家五星级酒店", ["服务细致到位，真的配得上五星", "行政酒廊的下午茶很不错"],
             ["服务完全配不上五星的价格", "泳池一直在维修，根本用不了"]),
        ],
        "pos": ["房间干净整洁，床品也很舒服", "前台服务热情，办理入住很快", "早餐种类丰富，味道也不错",
                "隔音效果很好，一晚上睡得很香", "还免费给我们升级了房型", "卫生间很大，热水也很足",
                "退房的时候还送了小礼物", "房间里的布置很温馨", "工作人员记得我们的名字", "设施都很新"],
        "neg": ["房间有一股霉味", "隔音太差，隔壁说话听得一清二楚", "床单上有污渍", "空调坏了，找了三次都没人来修",
                "早餐就几样冷菜，根本没法吃", "前台态度冷淡，爱答不理的", "图片和实物差距太大",
                "卫生间的下水道堵了", "退押金拖了一个星期", "半夜楼上一直有人走动，根本睡不着"],
        "minor_neg": ["停车要另外收费", "房间稍微小了一点", "早餐结束得有点早", "电梯有点慢"],
        "minor_pos": ["大堂装修得挺气派", "位置还算方便", "前台小姑娘挺有礼貌", "价格确实便宜"],
        "intros": ["出差住了{item}", "周末带家人住了{item}", "在{item}住了两晚", "国庆假期订了{item}",
                   "朋友推荐的{item}"],
        "vpos": ["下次来还住这家", "五星好评", "非常推荐", "性价比很高", "会推荐给朋友的"],
        "vneg": ["再也不会住了", "差评", "大家千万别订", "不值这个价", "后悔订了这家"],
    },
    "手机": {
        "items": [
            ("这款手机", ["拍照效果非常好，夜景也很清楚", "屏幕显示细腻，看视频很舒服"],
             ["拍照糊成一片", "屏幕有一块亮点"]),
            ("新买的这台手机", ["系统流畅，一点都不卡", "充电速度很快，半小时就充满了"],
             ["用了不到一个月就开始卡顿", "充电口接触不良"]),
            ("这部国产旗舰", ["性能很强，打游戏一点都不掉帧", "做工完全不输进口大牌"],
             ["玩游戏发热特别严重", "后盖缝隙大得能塞进指甲"]),
            ("给我妈买的这款老人机", ["字大声音也大，老人用着很方便", "待机时间特别长，一周充一次电"],
             ["按键很硬，老人根本按不动", "声音小得听不清对方说话"]),
            ("这款折叠屏手机", ["展开以后看文档特别方便", "折痕几乎看不出来"],
             ["折痕特别明显", "用了两个月铰链就松了"]),
        ],
        "pos": ["电池很耐用，重度使用一天也没问题", "手感很好，拿着不累", "信号比我之前的手机强多了",
                "系统很干净，没有什么广告", "外观很漂亮，颜色也很高级", "售后服务很周到", "物流很快，第二天就到了",
                "扬声器音质很好", "指纹解锁又快又准", "价格很实在"],
        "neg": ["电池不耐用，半天就得充电", "信号很差，在电梯里直接没网", "系统广告太多了，烦死了",
                "外壳很廉价，一摔就裂了", "售后推来推去，就是不给解决", "收到的时候包装被拆过",
                "扬声器有杂音", "指纹解锁经常识别不了", "自带软件删都删不掉", "用了两周就自动重启好几次"],
        "minor_neg": ["机身稍微有点重", "没有送充电器", "价格不算便宜", "颜色选择有点少"],
        "minor_pos": ["外观还算好看", "包装挺精致的", "价格倒是不贵", "颜色挺好看"],
        "intros": ["用了{item}一个月了", "双十一买了{item}", "换了{item}", "给自己买了{item}",
                   "纠结了很久还是选了{item}"],
        "vpos": ["值得购买", "强烈推荐", "五星好评", "这个价位买到很值", "会推荐给家人的"],
        "vneg": ["千万别买", "后悔死了", "差评", "已经申请退货了", "不推荐"],
    },
    "电影": {
        "items": [
            ("这部国产科幻片", ["特效很震撼，完全不输好莱坞", "世界观设定很完整"],
             ["特效很廉价，像十年前的游戏", "世界观设定漏洞百出"]),
            ("这部动画片", ["画面很精美，每一帧都能当壁纸", "大人小孩都看得很开心"],
             ["画面粗糙得像半成品", "剧情幼稚，小孩都看不下去"]),
            ("这部悬疑片", ["反转一个接一个，到最后才猜到凶手", "伏笔埋得很巧妙"],
             ["开场十分钟就猜到了凶手", "反转生硬，完全说不通"]),
            ("这部爱情片", ["男女主很有化学反应", "结局很温暖，看完心里暖暖的"],
             ["男女主一点火花都没有", "结局狗血得让人尴尬"]),
            ("这部喜剧", ["笑点很密集，全场都在笑", "笑完以后还有点感动"],
             ["笑点全靠尬", "全场没有一个人笑"]),
            ("这部纪录片", ["拍摄的画面很震撼", "看完学到了很多知识"],
             ["旁白一直在重复同样的话", "内容空洞，像是广告片"]),
        ],
        "pos": ["剧情紧凑，一点都不拖沓", "演员演技在线", "结局很感人，看哭了", "配乐很好听",
                "故事讲得很完整", "细节经得起推敲", "两个多小时一点都不觉得长", "看完还想再刷一遍",
                "每个角色都很立体", "节奏把握得很好"],
        "neg": ["剧情拖沓，看得我直打哈欠", "演员演技太尬了", "结局莫名其妙", "逻辑漏洞一大堆",
                "中途好几个人离场了", "故事讲得乱七八糟", "台词尴尬得让人脚趾抠地", "看到一半就想走了",
                "角色都很扁平", "剪辑太乱，根本看不懂"],
        "minor_neg": ["开头有点慢热", "片长稍微长了点", "有一条支线有点多余", "预告片剧透得有点多"],
        "minor_pos": ["海报挺好看的", "配乐还行", "主演颜值挺高", "开头还算吸引人"],
        "intros": ["昨晚看了{item}", "和朋友一起去看了{item}", "周末在家看了{item}", "首映当天就去看了{item}",
                   "冲着主演去看了{item}"],
        "vpos": ["值得一看", "强烈推荐", "今年看过最好的电影", "值回票价", "还会二刷"],
        "vneg": ["不值票价", "浪费了两个小时", "不推荐", "大家别去了", "真后悔买票"],
    },
    "书": {
        "items": [
            ("这本小说", ["人物写得很立体", "结局出人意料又合情合理"],
             ["人物都是纸片人", "结局仓促得像没写完"]),
            ("这本历史读物", ["把枯燥的历史讲得像故事一样", "资料很详实，观点也很客观"],
             ["全是年份和人名，读起来特别枯燥", "好几处史实都写错了"]),
            ("这本育儿书", ["方法都很实用，已经用上了", "语言通俗易懂"],
             ["全是空话，没什么可操作的方法", "观点很陈旧"]),
            ("这本散文集", ["文字很干净，读着很安静", "每一篇都值得反复读"],
             ["文字矫揉造作", "大部分文章都很空洞"]),
            ("这套儿童绘本", ["画风很可爱，孩子天天要我讲", "故事简单又有教育意义"],
             ["画风很粗糙", "故事讲得莫名其妙，孩子不爱看"]),
        ],
        "pos": ["文笔优美，读起来很舒服", "内容很扎实，学到了很多", "一口气读完了，根本停不下来",
                "印刷和纸张都很好", "观点很有启发", "翻译很流畅", "装帧很精美，送人也合适",
                "读完以后想了很久", "每一章都有收获", "推荐给了好几个朋友"],
        "neg": ["内容空洞，全是废话", "翻译生硬，读起来很别扭", "错别字太多了", "纸张很薄，还有一股怪味",
                "读了一半就读不下去了", "书角都压坏了", "和简介说的完全不一样", "排版很乱，看得眼睛疼",
                "内容东拼西凑", "价格很贵，内容却很单薄"],
        "minor_neg": ["开头有点慢", "字稍微有点小", "书有点厚，不方便带着", "封面设计一般"],
        "minor_pos": ["封面挺好看", "书名挺吸引人", "纸张摸着还行", "简介写得很好"],
        "intros": ["刚读完{item}", "读书会选了{item}", "在书店翻了翻就买了{item}", "朋友送了我{item}",
                   "趁打折买了{item}"],
        "vpos": ["值得一读", "强烈推荐", "五星", "会推荐给身边的人", "已经准备读作者的其他作品了"],
        "vneg": ["不推荐", "白花钱了", "差评", "不值得买", "看完就送人了"],
    },
    "网购": {
        "items": [
            ("这件羽绒服", ["很暖和，零下十度穿着也不冷", "一点都不跑绒", "颜色很正，没有色差"],
             ["一点都不保暖", "到处跑绒，穿一次黑裤子全是毛", "色差很严重"]),
            ("这双运动鞋", ["穿着很舒服，跑步也不累脚", "鞋底很软，弹性很好", "尺码很标准"],
             ["穿了一周就开胶了", "特别磨脚，走路都疼", "尺码偏小两个号"]),
            ("这个电饭煲", ["煮出来的米饭很香", "预约功能很好用"],
             ["煮出来的饭夹生", "内胆涂层用了一个月就掉了"]),
            ("这款扫地机器人", ["扫得很干净，边角都能照顾到", "规划路线很聪明"],
             ["天天卡在沙发底下", "越扫越脏，头发全缠在刷子上"]),
            ("这个行李箱", ["轮子很顺滑，推起来很轻松", "托运了好几次都没有磕坏"],
             ["第一次托运轮子就掉了", "拉杆晃得厉害"]),
        ],
        "pos": ["质量很好，做工精细", "和描述的一模一样", "快递第二天就到了", "客服回复很及时，也很耐心",
                "包装很用心", "价格比商场便宜不少", "用了一段时间，效果很明显", "卖家还附了一张手写的感谢卡",
                "发货特别快", "送的赠品也很实用"],
        "neg": ["质量太差了，用了两次就坏了", "和图片完全不一样", "快递慢得离谱，一周才到", "客服一直推卸责任",
                "收到的时候包装都破了", "有很大的异味", "退货流程特别麻烦", "卖家发错了货",
                "到手价比宣传的还贵", "明显是用过的二手货"],
        "minor_neg": ["物流稍微慢了一点", "包装有点简陋", "颜色比图片深一点", "价格不算便宜"],
        "minor_pos": ["包装挺好的", "物流还算快", "价格倒是便宜", "客服说话挺客气"],
        "intros": ["在网上买了{item}", "趁大促买了{item}", "看了很多评价才下单了{item}", "给家里人买了{item}",
                   "第二次买{item}了"],
        "vpos": ["会回购的", "五星好评", "推荐购买", "很满意的一次购物", "已经推荐给朋友了"],
        "vneg": ["千万别买", "差评", "已经退货了", "后悔买了", "不推荐"],
    },
    "餐厅": {
        "items": [
            ("这家火锅店", ["锅底很香，牛肉也很新鲜", "毛肚很脆，涮几秒就能吃"],
             ["锅底一股地沟油味", "牛肉一看就是合成的"]),
            ("这家粤菜馆", ["虾饺皮薄馅大", "烧鹅皮脆肉嫩"],
             ["虾饺皮厚得像饺子", "烧鹅又干又柴"]),
            ("这家日料店", ["刺身很新鲜，入口即化", "师傅的手艺很好"],
             ["刺身不新鲜，还有腥味", "寿司的米饭是冷硬的"]),
            ("这家西餐厅", ["牛排煎得刚刚好", "甜品做得很精致"],
             ["五分熟的牛排端上来全熟了", "甜品甜得发齁"]),
            ("这家自助餐", ["品种很多，海鲜也一直在补", "每样菜都很新鲜"],
             ["海鲜半天都不补", "菜都是冷的，好多都干了"]),
        ],
        "pos": ["菜品新鲜，味道很好", "服务员很热情，一直帮忙加水", "环境优雅，很适合约会", "上菜速度很快",
                "性价比很高", "招牌菜名不虚传", "分量很足", "店里很干净", "老板还送了我们一份甜品",
                "排队的时候还有免费小吃"],
        "neg": ["排队等了一个多小时", "服务员态度很差", "菜品不新鲜", "上菜特别慢", "价格贵得离谱，味道却一般",
                "餐具不干净", "结账的时候多收了钱", "菜里吃出了虫子", "服务员催着我们赶紧走", "店里又吵又挤"],
        "minor_neg": ["周末人有点多", "停车不太方便", "价格稍微偏高", "位置有点难找"],
        "minor_pos": ["装修挺好看的", "位置很方便", "菜单设计得挺用心", "门口迎宾很热情"],
        "intros": ["周末和朋友去了{item}", "带爸妈去了{item}", "团建选了{item}", "第一次去{item}",
                   "路过就进了{item}"],
        "vpos": ["下次还会再来", "强烈推荐", "五星好评", "已经成了我们的固定据点", "值得专门跑一趟"],
        "vneg": ["再也不会来了", "差评", "不推荐", "大家避雷", "真是花钱买罪受"],
    },
}

ZH_NEGATED_POS = ["一点也不差", "完全没有让我失望", "挑不出什么毛病", "真的没什么可挑剔的", "比想象中好太多了",
                  "没有一点不满意的地方", "不得不说，确实不错", "没想到这么好"]
ZH_NEGATED_NEG = ["一点都不值这个价", "完全不推荐", "没有一个让人满意的地方", "真的不怎么样", "根本不像宣传的那样",
                  "一点都不好", "不会再给第二次机会了", "没有任何亮点"]
ZH_SHORT_POS = ["太满意了，下次还来！", "超出预期，好评！", "非常棒，没有之一。", "很好很好，推荐！", "真心不错，值得。",
                "体验很好，谢谢！"]
ZH_SHORT_NEG = ["太失望了，差评！", "完全不行，别买。", "糟糕透了，避雷！", "真的很差，后悔。", "浪费钱，不推荐。",
                "体验极差，再见！"]
ZH_SARCASM = ["真是太棒了，等了两个小时饭才到，凉得正好不烫嘴。", "这续航真厉害，一上午就没电了。",
              "服务真好，叫了三次服务员都没人理。", "这电影真提神，我在电影院睡了两觉。",
              "包装真结实，箱子都压扁了，东西也碎了。", "这酒店隔音真好，隔壁打呼噜我都能听清节奏。"]
ZH_EXPECT_NEG = ["本来很期待{item}，结果{n}。", "冲着好评选了{item}，没想到{n}。", "朋友都说{item}好，可惜{n}，{n2}。",
                 "我很想喜欢{item}，但是{n}。", "看宣传以为{item}会很好，实际上{n}。"]
ZH_EXPECT_POS = ["本来对{item}没抱什么希望，没想到{p}。", "一开始还有点担心{item}，结果{p}，{p2}。",
                 "看到差评还犹豫了一下，实际上{item}{p}。", "本以为{item}一般般，没想到{p}。",
                 "差点错过{item}，幸好试了，{p}。"]
ZH_OPENERS = ["", "", "", "说实话，", "总的来说，", "不得不说，", "讲真，"]


def _zh_sent_review(rng: random.Random, label: str) -> str:
    dom = ZH_SENT_DOMAINS[pick(rng, list(ZH_SENT_DOMAINS))]
    item, ipos, ineg = pick(rng, dom["items"])
    pos_pool = ipos + ipos + dom["pos"]
    neg_pool = ineg + ineg + dom["neg"]
    good = pos_pool if label == "正面" else neg_pool
    minor_other = dom["minor_neg"] if label == "正面" else dom["minor_pos"]
    v = pick(rng, dom["vpos"] if label == "正面" else dom["vneg"])
    end = pick(rng, ["。", "。", "！"])
    g1 = pick(rng, good)
    g2 = pick(rng, good)
    while g2 == g1:
        g2 = pick(rng, good)
    intro = pick(rng, dom["intros"]).format(item=item)
    opener = pick(rng, ZH_OPENERS)
    r = rng.random()
    if label == "负面" and r < 0.04:
        return pick(rng, ZH_SARCASM)
    if r < 0.08:
        return pick(rng, ZH_SHORT_POS if label == "正面" else ZH_SHORT_NEG)
    if r < 0.24:
        return f"{intro}，{opener}{g1}，{g2}。{v}{end}"
    if r < 0.36:
        return f"{intro}，{g1}。{v}{end}"
    if r < 0.52:
        m = pick(rng, minor_other)
        frame = pick(rng, ["虽然{m}，但是{g}，{v}{e}", "{m}，不过{g}。{v}{e}", "{intro}，{m}，但{g}，{g2}。{v}{e}",
                           "除了{m}，其他都没得说，{g}。"] if label == "正面" else
                     ["虽然{m}，但是{g}，{v}{e}", "{m}，可是{g}。{v}{e}", "{intro}，{m}，但{g}，{g2}。{v}{e}",
                      "也就{m}，{g}，{g2}。"])
        return frame.format(m=m, g=g1, g2=g2, v=v, e=end, intro=intro)
    if r < 0.66:
        t = pick(rng, ZH_EXPECT_POS if label == "正面" else ZH_EXPECT_NEG)
        return t.format(item=item, n=g1, n2=g2, p=g1, p2=g2)
    if r < 0.78:
        ng = pick(rng, ZH_NEGATED_POS if label == "正面" else ZH_NEGATED_NEG)
        if rng.random() < 0.5:
            return f"{ng}，{g1}。"
        return f"{intro}，{ng}。{g1}，{g2}。"
    if r < 0.88:  # concede a minor point on the other side, then the dominant side wins
        b = pick(rng, minor_other)
        for _ in range(20):
            if not (zh_clash(b, g1) or zh_clash(b, g2)):
                break
            b = pick(rng, minor_other)
        frame = pick(rng, ["确实{b}，但{g}，{g2}，{v}{e}", "{intro}。{b}是真的，可{g}，{v}{e}",
                           "{intro}，尽管{b}，{g}。{v}{e}"])
        return frame.format(b=b, g=g1, g2=g2, v=v, e=end, intro=intro)
    if r < 0.95:
        g3 = pick(rng, good)
        while g3 in (g1, g2):
            g3 = pick(rng, good)
        m = pick(rng, minor_other)
        aside = f"唯一的小问题是{m}" if label == "正面" else f"唯一还行的是{m}"
        return f"{intro}，{opener}{g1}，{g2}，而且{g3}。{aside}。{v}{end}"
    return f"{opener}{g1}。{v}{end}"


def make_zh_sentiment() -> None:
    rng = random.Random(1002)
    train, dev = [], []
    for lab in ("正面", "负面"):
        def mk(r, lab=lab):
            t = _zh_sent_review(r, lab).replace(" ", "")
            return t if 6 <= len(t) <= 150 else None
        rows = pool_unique(mk, 260, rng, key=lambda s: re.sub(r"[，。！？、\W]+", "", s))
        train += [[t, lab] for t in rows[:200]]
        dev += [[t, lab] for t in rows[200:]]
    rng.shuffle(train)
    rng.shuffle(dev)
    emit_csv("zh_sentiment/train.csv", ["text", "label"], train)
    emit_csv("zh_sentiment/dev.csv", ["text", "label"], dev)
    emit_csv("zh_sentiment/fewshot_train.csv", ["text", "label"], few_per_label(train, 8))
    for name, rows in (("train", train), ("dev", dev)):
        cl = [len(r[0]) for r in rows]
        SUMMARY.append(f"zh_sentiment/{name}.csv: {len(rows)} rows ({dist(r[1] for r in rows)}); "
                       f"chars {min(cl)}-{max(cl)}")


# ============================================================================================
# 3. English NLI sentence pairs (data/en_pair): entailment / neutral / contradiction
# ============================================================================================

# People: (indefinite NP, definite NP, hypernym NPs, possessive pronoun)
NLI_PEOPLE = [
    ("A young woman", "The woman", ["A woman", "A person", "Someone"], "her"),
    ("An elderly man", "The man", ["A man", "An old man", "A person"], "his"),
    ("A teenage boy", "The boy", ["A boy", "A teenager", "A young person"], "his"),
    ("A little girl", "The girl", ["A girl", "A child", "A kid"], "her"),
    ("A man in a red jacket", "The man", ["A man", "A person", "Someone"], "his"),
    ("A woman with curly hair", "The woman", ["A woman", "A person", "Somebody"], "her"),
    ("Two friends", "The friends", ["Two people", "A pair of people", "Some people"], "their"),
    ("A group of students", "The students", ["Some students", "Several people", "A group of people"], "their"),
    ("A middle-aged chef", "The chef", ["A cook", "A person", "Someone"], "his"),
    ("A tall nurse", "The nurse", ["A nurse", "A health worker", "A person"], "her"),
]

# Activities: present-tense VP (after "is/are" dropped), hypernym VPs, contradicting VPs,
# neutral refinements (add unstated detail), plausible places.
NLI_ACTIONS = [
    ("playing the guitar", ["playing an instrument", "making music"], ["sleeping", "sitting with empty hands"],
     ["playing a song {p} wrote", "practising for a concert", "playing for tips"], ["park", "stage", "street", "beach"]),
    ("riding a bicycle", ["riding a bike", "cycling"], ["walking beside a parked bicycle", "sitting on a sofa"],
     ["riding to work", "racing a friend", "riding a new bicycle"], ["street", "park", "beach"]),
    ("reading a thick book", ["reading", "looking at a book"], ["throwing a book into the sea", "sleeping"],
     ["reading a mystery novel", "studying for an exam", "reading a book borrowed from a library"],
     ["park", "library", "cafe", "train"]),
    ("slicing vegetables", ["cutting food", "preparing food"], ["eating at a restaurant table", "washing a car"],
     ["making soup for dinner", "cooking for a large family", "preparing a salad"], ["kitchen"]),
    ("painting a fence white", ["painting", "working on a fence"], ["tearing down a fence", "swimming"],
     ["painting a fence for a neighbour", "earning pocket money", "using an expensive brush"], ["garden"]),
    ("jogging along the path", ["running", "exercising"], ["sitting on a bench", "lying in bed"],
     ["training for a marathon", "jogging before work", "trying to lose weight"], ["park", "beach"]),
    ("feeding ducks", ["feeding birds", "giving food to animals"], ["chasing the ducks away", "sleeping"],
     ["feeding ducks stale bread", "feeding ducks every morning", "feeding ducks with a grandparent"], ["park"]),
    ("typing on a laptop", ["using a computer", "typing"], ["writing with a pencil on paper", "dancing"],
     ["writing an email to a boss", "finishing a report", "chatting online with a friend"],
     ["cafe", "library", "train"]),
    ("carrying a large box", ["carrying something", "holding a box"], ["empty-handed", "lying on the floor"],
     ["moving into a new flat", "carrying a box full of books", "delivering a parcel"], ["street", "stairs"]),
    ("building a sandcastle", ["playing in the sand", "building something"], ["swimming far from shore", "asleep"],
     ["building a sandcastle for a contest", "building the biggest sandcastle on the beach",
      "building a sandcastle with a bucket that belongs to a friend"], ["beach"]),
    ("singing into a microphone", ["singing", "performing"], ["silent", "eating lunch"],
     ["singing a famous song", "singing at a wedding", "auditioning for a band"], ["stage"]),
    ("washing dishes", ["cleaning", "doing the washing up"], ["breaking dishes on purpose", "outside in the rain"],
     ["washing dishes after a party", "washing dishes to help out", "washing the dishes alone after dinner"],
     ["kitchen"]),
]
NLI_PLACES = {
    "park": ("in a crowded park", "outside", ["inside a small office", "in a windowless basement"]),
    "stage": ("on a brightly lit stage", "in front of an audience", ["alone in an empty field", "in a bathtub"]),
    "street": ("on a busy city street", "outdoors in a city", ["in a quiet forest", "aboard a ship at sea"]),
    "beach": ("on a sandy beach", "near the sea", ["in the middle of a desert", "in a snowy mountain cabin"]),
    "library": ("in a quiet library", "indoors", ["on a football pitch", "at the top of a mountain"]),
    "cafe": ("in a small cafe", "inside a building", ["in a swimming pool", "on a rollercoaster"]),
    "train": ("on a crowded train", "travelling", ["in bed at home", "in a rowing boat"]),
    "kitchen": ("in a busy kitchen", "indoors", ["in a car park", "on a beach"]),
    "garden": ("in a small garden", "outside", ["inside a cinema", "underwater"]),
    "stairs": ("on a narrow staircase", "on some stairs", ["in a swimming pool", "on a beach"]),
}
NLI_TIMES = [("at sunset", "in the evening", "at dawn"), ("early in the morning", "in the morning", "at midnight"),
             ("in the pouring rain", "in bad weather", "under a clear, dry sky"),
             ("on a snowy afternoon", "in cold weather", "on a scorching summer afternoon"), ("", "", "")]
NLI_NEUTRAL_EXTRA = ["is on holiday", "is waiting for a friend", "is very tired", "is famous in the town",
                     "has done this many times before", "is about to go home", "is doing this for the first time",
                     "is being filmed for a television show", "is happy", "is late for an appointment"]

# Hand-written triples for variety beyond people-in-scenes: premise, entailment, neutral, contradiction.
NLI_TRIPLES = [
    ("The library opens at nine on weekdays and closes at six.", "The library is open on weekday afternoons.",
     "The library has a cafe on the ground floor.", "The library is closed every weekday."),
    ("Maria missed the bus, so she walked the three miles to the office.", "Maria went to the office on foot.",
     "Maria was late for a meeting.", "Maria took the bus to the office."),
    ("The bakery sold out of bread before noon on Saturday.", "There was no bread left at the bakery on Saturday afternoon.",
     "The bakery raised its prices on Saturday.", "The bakery still had plenty of bread on Saturday evening."),
    ("After the storm, the river rose by two metres and flooded the low fields.", "Some fields were under water after the storm.",
     "The storm lasted for three days.", "The river level fell after the storm."),
    ("Tom has never been on an aeroplane.", "Tom has not flown before.", "Tom is afraid of flying.",
     "Tom flies to Madrid every month."),
    ("The museum's new wing was designed by a local architect and opened in spring.", "The museum has a new wing.",
     "The new wing cost more than expected.", "The museum has never been extended."),
    ("Every seat in the theatre was taken for the opening night.", "The theatre was full on opening night.",
     "The play received excellent reviews.", "Half the seats were empty on opening night."),
    ("The company hired forty new engineers this year.", "The company took on new staff this year.",
     "The company plans to hire more engineers next year.", "The company did not hire anyone this year."),
    ("Lena speaks French and Portuguese fluently.", "Lena speaks more than one language.",
     "Lena learned Portuguese while living in Lisbon.", "Lena speaks only English."),
    ("The soup needed more salt, so the cook added a pinch before serving.", "Salt was added to the soup.",
     "The soup was made with chicken stock.", "Nothing was added to the soup."),
    ("The train was delayed by twenty minutes because of a signal fault.", "The train did not leave on time.",
     "The passengers were given free coffee.", "The train arrived exactly on time."),
    ("Our neighbour's dog barks whenever the postman comes.", "The dog makes noise when the postman arrives.",
     "The postman is scared of the dog.", "The dog stays silent when the postman comes."),
    ("The bridge was closed to cars but remained open to pedestrians.", "People could still walk across the bridge.",
     "The bridge was closed for repairs.", "Nobody was allowed to cross the bridge."),
    ("Sam finished the marathon in just under four hours.", "Sam completed the marathon.",
     "Sam trained for six months.", "Sam dropped out halfway through the marathon."),
    ("The printer is out of ink, so nobody can print today.", "Printing is not possible today.",
     "The printer is very old.", "Everyone printed their reports today."),
    ("A heavy frost killed most of the tomato plants overnight.", "Many tomato plants died.",
     "The gardener forgot to cover the plants.", "The tomato plants thrived after the frost."),
    ("The shop gives a ten percent discount to students.", "Students pay less at the shop.",
     "Most customers of the shop are students.", "Students pay more than other customers at the shop."),
    ("Grandpa planted an apple tree the year my mother was born.", "Grandpa planted a tree.",
     "The apple tree still produces fruit.", "Grandpa has never planted anything."),
    ("The meeting was moved from Tuesday to Thursday.", "The meeting did not take place on Tuesday.",
     "The meeting was moved because the manager was ill.", "The meeting happened on Tuesday as planned."),
    ("Ana's phone battery died in the middle of the call.", "Ana's call was cut off.",
     "Ana was talking to her brother.", "Ana's phone was fully charged throughout the call."),
    ("The hotel has no lift, so guests carry their bags up the stairs.", "Guests use the stairs at the hotel.",
     "The hotel is in an old building.", "Guests take the lift to their rooms."),
    ("Most of the class passed the exam, but three students failed.", "Some students failed the exam.",
     "The exam was harder than last year's.", "Every student in the class passed the exam."),
    ("The festival was cancelled because of the heavy rain.", "The festival did not go ahead.",
     "The organisers lost a lot of money.", "The festival went ahead despite the rain."),
    ("Priya bought a second-hand piano and is teaching herself to play.", "Priya owns a piano.",
     "Priya wants to become a professional pianist.", "Priya is taking piano lessons from a teacher."),
    ("The old factory was turned into flats ten years ago.", "People live in the old factory building now.",
     "The flats are expensive.", "The factory is still producing goods."),
    ("The cat knocked a glass off the table, and it shattered.", "A glass broke.",
     "The glass was full of water.", "The glass survived the fall without a crack."),
    ("It snowed all night, and by morning the roads were blocked.", "The roads were blocked in the morning.",
     "Schools were closed because of the snow.", "There was no snow on the roads in the morning."),
    ("The author wrote her first novel while working as a nurse.", "The author worked as a nurse.",
     "The novel is about a hospital.", "The author has never had a job outside writing."),
    ("The team lost the final by a single goal.", "The team did not win the final.",
     "The final was played in the rain.", "The team won the final comfortably."),
    ("Jonas forgot his umbrella and got soaked on the way home.", "Jonas got wet.",
     "Jonas caught a cold the next day.", "Jonas stayed dry on the way home."),
    ("The restaurant only serves vegetarian dishes.", "The restaurant does not serve meat.",
     "The restaurant is popular with students.", "The restaurant's most famous dish is a beef stew."),
    ("The parcel was left with a neighbour because nobody was home.", "The parcel was not handed to the recipient directly.",
     "The parcel contained a birthday present.", "The recipient signed for the parcel personally."),
    ("The bus driver waited for the elderly passenger to sit down before driving off.",
     "The driver did not drive off immediately.", "The passenger thanked the driver.",
     "The driver drove off before the passenger sat down."),
    ("Clara has two older brothers and no sisters.", "Clara has siblings.", "Clara's brothers live abroad.",
     "Clara is an only child."),
    ("The lake freezes over every winter, and people skate on it.", "The lake becomes ice in winter.",
     "The skating season lasts three months.", "The lake never freezes."),
    ("The software update fixed the login problem but made the app slower.", "The login problem was fixed.",
     "Many users complained about the update.", "The update made the app faster."),
]


_NLI_OUTDOOR = {"park", "street", "beach", "garden"}


def _nli_scene(rng: random.Random) -> dict:
    person, pdef, phyper, poss = pick(rng, NLI_PEOPLE)
    act, ahyper, acontra, aneutral, places = pick(rng, NLI_ACTIONS)
    place_key = pick(rng, places)
    ploc, plhyper, plcontra = NLI_PLACES[place_key]
    times = NLI_TIMES if place_key in _NLI_OUTDOOR else [x for x in NLI_TIMES if "rain" not in x[0] and "snow" not in x[0]]
    t, thyper, tcontra = pick(rng, times)
    plural = person.startswith(("Two", "A group"))
    be = "are" if plural else "is"
    pron = {"her": "she", "his": "he", "their": "they"}[poss]
    if rng.random() < 0.35 and t:
        premise = f"{cap(ploc)} {t}, {person[0].lower() + person[1:]} {be} {act}."
    else:
        premise = f"{person} {be} {act} {ploc}" + (f" {t}" if t else "") + "."
    if rng.random() < 0.25:
        obj = "them" if plural else ("her" if poss == "her" else "him")
        extra = pick(rng, [f"{cap(pron)} {'look' if plural else 'looks'} completely focused.",
                           "A few people walk past without stopping.", "A dog watches from nearby.",
                           f"A bag lies next to {obj}."])
        premise += " " + extra
    return dict(premise=premise, pdef=pdef, phyper=phyper, be=be, plural=plural, pron=pron, act=act,
                ahyper=ahyper, acontra=acontra, aneutral=aneutral, plhyper=plhyper, plcontra=plcontra,
                thyper=thyper, tcontra=tcontra)


def _nli_hypotheses(rng: random.Random, sc: dict, label: str) -> list[str]:
    hyp = pick(rng, sc["phyper"])
    hbe = "are" if hyp.split()[0] in ("Two", "Some", "Several") else "is"
    pdef, be, act, plhyper = sc["pdef"], sc["be"], sc["act"], sc["plhyper"]
    ah = pick(rng, sc["ahyper"])
    if label == "entailment":
        opts = [f"{hyp} {hbe} {ah}.", f"{hyp} {hbe} {plhyper}.", f"{pdef} {be} {act}.", f"{hyp} {hbe} {ah} {plhyper}."]
        if sc["thyper"]:
            opts.append(f"{hyp} {hbe} {ah} {sc['thyper']}.")
        return opts
    if label == "contradiction":
        ac = pick(rng, sc["acontra"])
        opts = [f"{pdef} {be} {ac}.", f"{pdef} {be} {act} {pick(rng, sc['plcontra'])}.", f"Nobody is {act}.",
                f"{pdef} {be} {ac} {sc['plcontra'][0]}."]
        if sc["tcontra"]:
            opts.append(f"{pdef} {be} {act} {sc['tcontra']}.")
        return opts
    # neutral: adds information the premise neither states nor rules out
    neu = pick(rng, sc["aneutral"]).format(p=sc["pron"])
    extra = pick(rng, NLI_NEUTRAL_EXTRA)
    if sc["plural"]:
        extra = re.sub(r"^is ", "are ", re.sub(r"^has ", "have ", extra))
    return [f"{pdef} {be} {neu}.", f"{pdef} {extra}.", f"{hyp} {hbe} {neu} {plhyper}."]


def make_en_pair() -> None:
    rng = random.Random(1003)
    labels = ["entailment", "neutral", "contradiction"]
    # Every premise gets one hypothesis per label (as in SNLI), and no premise is in both splits.
    triples = list(NLI_TRIPLES)
    rng.shuffle(triples)
    tri_dev, tri_train = triples[:9], triples[9:]
    n_scene_train = (402 - 3 * len(tri_train)) // 3
    n_scene_dev = (120 - 3 * len(tri_dev)) // 3
    scenes: dict[str, list] = {}
    while len(scenes) < n_scene_train + n_scene_dev:
        sc = _nli_scene(rng)
        if sc["premise"] in scenes:
            continue
        scenes[sc["premise"]] = [[sc["premise"], pick(rng, _nli_hypotheses(rng, sc, lab)), lab] for lab in labels]
    groups = list(scenes.values())
    train = [[p, h, lab] for p, *hs in tri_train for h, lab in zip(hs, labels)]
    dev = [[p, h, lab] for p, *hs in tri_dev for h, lab in zip(hs, labels)]
    for g in groups[:n_scene_train]:
        train += g
    for g in groups[n_scene_train:]:
        dev += g
    rng.shuffle(train)
    rng.shuffle(dev)
    assert not ({r[0] for r in train} & {r[0] for r in dev})
    emit_csv("en_pair/train.csv", ["premise", "hypothesis", "label"], train)
    emit_csv("en_pair/dev.csv", ["premise", "hypothesis", "label"], dev)
    for name, rows in (("train", train), ("dev", dev)):
        SUMMARY.append(f"en_pair/{name}.csv: {len(rows)} rows ({dist(r[2] for r in rows)}); "
                       f"{len({r[0] for r in rows})} distinct premises")


# ============================================================================================
# 4. English multi-label customer support (data/en_multilabel)
# ============================================================================================

ML_TOPICS = ["billing", "shipping", "returns", "account", "product_quality", "technical"]
ML_PRODUCTS = ["coffee grinder", "yoga mat", "desk lamp", "rain jacket", "bluetooth speaker", "stand mixer",
               "pair of hiking boots", "baby monitor", "garden hose", "electric toothbrush", "office chair",
               "set of saucepans", "smart thermostat", "travel backpack", "wool blanket"]
ML_ELECTRONIC = ["bluetooth speaker", "baby monitor", "smart thermostat", "electric toothbrush", "smart doorbell",
                 "fitness watch", "wireless camera"]
ML_WASHABLE = ["rain jacket", "wool blanket", "cotton hoodie", "set of bed sheets", "pair of linen trousers"]
ML_FURNITURE = ["office chair", "side table", "bar stool", "garden bench", "bookshelf"]
ML_SNIPPETS = {
    "billing": [
        "I was charged twice for order {order}.",
        "My card was billed {amount} but the order total was {amount2}.",
        "Could you send me a VAT invoice for order {order}? I need it for my expenses.",
        "The discount code {code} was accepted at checkout but the full price was taken from my card.",
        "My subscription renewed yesterday even though I cancelled it last month, so please stop the payment.",
        "There is a charge of {amount} on my statement that I do not recognise.",
        "My payment keeps getting declined even though my card works everywhere else.",
        "Why did my monthly plan go up from {amount2} to {amount} without any notice?",
        "I paid with a gift card and the balance was not deducted correctly.",
        "Can I switch from monthly to annual billing and get the difference credited?",
        "I was charged a delivery fee even though my basket was over the free delivery threshold.",
        "Please remove the saved card ending in {digits} from my payment methods and confirm no further charges will be taken.",
    ],
    "shipping": [
        "My order {order} was supposed to arrive on {day} and it still has not shown up.",
        "The tracking for {order} has said 'in transit' for {n} days without moving.",
        "The courier marked my parcel as delivered but there was nothing on my doorstep.",
        "Can I change the delivery address for order {order}? I will be staying with my parents next week.",
        "The parcel was left in the rain and the box was soaked through when I found it.",
        "Do you deliver to {country}? The checkout page will not accept my postcode.",
        "I paid for next-day delivery and it took {n} days.",
        "Only part of my order arrived; the {product} is still missing from the delivery.",
        "The delivery driver came while I was home but left a 'sorry we missed you' card anyway.",
        "Could you tell me which courier is handling order {order}? The tracking link does not work.",
        "Is it possible to choose a weekend delivery slot? I work long hours during the week.",
        "My parcel seems to have been sent to the wrong city according to the tracking page.",
    ],
    "returns": [
        "I would like to return the {product}; I ordered the wrong model by mistake.",
        "How do I get a returns label for order {order}?",
        "I sent the {product} back {n} days ago and the return still shows as not received.",
        "Is it too late to return something I bought {n} weeks ago? It is still unused in the box.",
        "Can I exchange the {product} for a different colour instead of returning it?",
        "The returns portal says my item is not eligible for return, but your policy says 30 days.",
        "I dropped the return off at the post office on {day}; when will it be processed?",
        "Do I have to pay for return postage if I simply changed my mind?",
        "I would like to swap the {product} for the larger model and pay the difference.",
        "My return was received last week but I have not heard anything since.",
        "Could you arrange a collection for a return? The box is too big for the post office.",
        "I lost the original packaging; can I still send the {product} back?",
    ],
    "account": [
        "I cannot log in because the password reset email never arrives.",
        "Please update the email address on my account to {email}.",
        "I think someone else has accessed my account; there are orders in my history I did not place.",
        "How do I delete my account and all the data you hold about me?",
        "My account has been locked after too many login attempts.",
        "I would like to merge my two accounts, one under {email} and one under my work address.",
        "I no longer want marketing emails; please unsubscribe me.",
        "The verification code sent to my phone expires before it arrives.",
        "I changed my surname after getting married and would like my account to show the new name.",
        "My loyalty points disappeared from my account overnight.",
        "I cannot remember which email address I used to sign up.",
        "Please turn on two-factor authentication for my account; I cannot find the setting.",
    ],
    "product_quality": [
        "The {product} arrived with a deep scratch across the front.",
        "After only {n} wears the {wproduct} has started to fall apart at the seams.",
        "The {product} smells strongly of chemicals and the smell will not go away.",
        "The stitching on the {wproduct} came loose within the first week.",
        "The {product} looks nothing like the photos; the material feels thin and cheap.",
        "One of the parts of the {product} was cracked straight out of the box.",
        "The colour of the {wproduct} faded badly after one wash.",
        "The {product} is noticeably smaller and lighter than the one described on the product page.",
        "The handle on the {product} snapped off while I was using it normally.",
        "The {product} I received is clearly a used item; there are marks and hair on it.",
        "The paint on the {fproduct} is already peeling.",
        "The {fproduct} wobbles because one of the legs is shorter than the others.",
    ],
    "technical": [
        "The app crashes every time I open the order history page.",
        "I cannot pair the {eproduct} with my phone; the app never finds it.",
        "Your website shows an error 500 whenever I try to check out.",
        "The firmware update for the {eproduct} failed halfway and now it will not turn on.",
        "The promo banner covers the 'place order' button on my phone, so I cannot finish my order.",
        "The {eproduct} keeps disconnecting from my home wifi every few minutes.",
        "The companion app asks me to log in again every time I open it.",
        "The page just spins forever when I try to upload a photo for my review.",
        "Notifications from the app arrive hours late or not at all.",
        "The setup wizard for the {eproduct} gets stuck on step three.",
        "The website will not load at all in my browser unless I turn off my ad blocker.",
        "The barcode scanner in your app does not recognise any product.",
    ],
}
ML_GREETINGS = ["", "", "", "Hi.", "Hello!", "Hi there!", "Good morning.", "Hello, I hope you can help.",
                "Hi, quick question.", "Hi, I need some help please."]
ML_CLOSINGS = ["", "", "", "Thanks.", "Thank you.", "Thanks in advance.", "Many thanks, {name}",
               "Looking forward to hearing from you.", "Please help.", "Kind regards, {name}", "Cheers, {name}",
               "This is really frustrating.", "I would appreciate a quick reply."]
ML_CONNECTORS = ["Also, ", "On top of that, ", "Separately, ", "And another thing: ", "While I have you, ",
                 "One more issue: ", "In addition, ", "", "Plus, "]
ML_NAMES = ["Amira", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jamal", "Kira", "Liam",
            "Mei", "Noah", "Olu", "Petra", "Quinn", "Rosa", "Sven", "Tara"]


def _ml_fill(rng: random.Random, tmpl: str, product: str, eproduct: str, wproduct: str, fproduct: str) -> str:
    amt = rng.randint(8, 240)
    amt2 = max(5, amt - rng.randint(3, 40))
    return tmpl.format(
        order=f"#{pick(rng, 'ABCDKLMRTW')}{rng.randint(10000, 99999)}", amount=f"£{amt}.{rng.randint(0, 99):02d}",
        amount2=f"£{amt2}.{rng.randint(0, 99):02d}", code=pick(rng, ["SPRING15", "WELCOME10", "FREESHIP", "SAVE20"]),
        day=pick(rng, ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]), n=rng.randint(3, 12),
        country=pick(rng, ["Ireland", "Norway", "Portugal", "Iceland", "Malta"]), product=product,
        eproduct=eproduct, wproduct=wproduct, fproduct=fproduct,
        email=f"{pick(rng, ML_NAMES).lower()}.{pick(rng, ['k', 'm', 'r', 's'])}{rng.randint(1, 99)}@example.com",
        digits=rng.randint(1000, 9999))


def _ml_message(rng: random.Random):
    r = rng.random()
    k = 1 if r < 0.55 else (2 if r < 0.88 else 3)
    topics = rng.sample(ML_TOPICS, k)
    product = pick(rng, ML_PRODUCTS)
    eproduct = product if product in ML_ELECTRONIC else pick(rng, ML_ELECTRONIC)
    wproduct = product if product in ML_WASHABLE else pick(rng, ML_WASHABLE)
    fproduct = product if product in ML_FURNITURE else pick(rng, ML_FURNITURE)
    name = pick(rng, ML_NAMES)
    parts = []
    for i, t in enumerate(topics):
        n_sent = 2 if rng.random() < 0.2 else 1
        sents = rng.sample(ML_SNIPPETS[t], n_sent)
        text = " ".join(_ml_fill(rng, s_, product, eproduct, wproduct, fproduct) for s_ in sents)
        if i > 0:
            conn = pick(rng, ML_CONNECTORS)
            text = conn + (text[0].lower() + text[1:] if conn and not text.startswith(("I ", "I'")) else text)
        parts.append(text)
    body = " ".join(parts)
    greet = pick(rng, ML_GREETINGS)
    close = pick(rng, ML_CLOSINGS).format(name=name)
    msg = " ".join(x for x in (greet, body, close) if x)
    labels = [t for t in ML_TOPICS if t in topics]
    return msg, labels


def make_en_multilabel() -> None:
    rng = random.Random(1004)
    rows = pool_unique(_ml_message, 520, rng, key=lambda x: norm_key(x[0]))
    train, dev = rows[:400], rows[400:]
    emit_jsonl("en_multilabel/train.jsonl", [{"text": t, "labels": ls} for t, ls in train])
    emit_jsonl("en_multilabel/dev.jsonl", [{"text": t, "labels": ls} for t, ls in dev])
    emit_csv("en_multilabel/train.csv", ["text", "labels"], [[t, ";".join(ls)] for t, ls in train])
    for name, rs in (("train", train), ("dev", dev)):
        per = Counter(lab for _, ls in rs for lab in ls)
        nlab = Counter(len(ls) for _, ls in rs)
        SUMMARY.append(f"en_multilabel/{name}.jsonl: {len(rs)} rows; topics " +
                       ", ".join(f"{t}={per[t]}" for t in ML_TOPICS) +
                       "; labels per row " + ", ".join(f"{k}:{nlab[k]}" for k in sorted(nlab)))
    SUMMARY.append("en_multilabel/train.csv: same 400 rows, labels joined with ';'")


# ============================================================================================
# 5. English semantic similarity regression (data/en_regression): sentence1, sentence2, score in [0, 5]
# ============================================================================================

# Subjects with interchangeable surface forms.
STS_SUBJECTS = [["A man", "A guy", "A gentleman"], ["A woman", "A lady"], ["A boy", "A young boy", "A little boy"],
                ["A girl", "A young girl", "A little girl"], ["A chef", "A cook"], ["An old man", "An elderly man"],
                ["A student", "A college student"], ["A musician", "A performer"]]
# Activity classes: verb forms (synonyms), objects (interchangeable surface forms), plausible places.
STS_ACTIVITIES = [
    (["is slicing", "is cutting", "is chopping"], [["an onion"], ["a tomato"], ["a loaf of bread", "some bread"],
                                                 ["a carrot"], ["a potato"]], ["kitchen", "restaurant"]),
    (["is playing", "is strumming"], [["a guitar", "an acoustic guitar"], ["a ukulele"], ["a banjo"]],
     ["stage", "park", "street", "bedroom"]),
    (["is playing"], [["the piano", "a piano"], ["the violin", "a violin"], ["the drums", "a drum kit"],
                      ["the flute", "a flute"]], ["stage", "bedroom", "school"]),
    (["is riding", "is on"], [["a bicycle", "a bike"], ["a horse"], ["a motorbike", "a motorcycle"],
                              ["a scooter"]], ["street", "park", "beach", "field"]),
    (["is reading", "is looking through"], [["a newspaper", "the paper"], ["a book", "a novel"], ["a letter"],
                                           ["a magazine"]], ["park", "train", "library", "bedroom"]),
    (["is eating", "is having"], [["an apple"], ["a sandwich"], ["a bowl of noodles", "some noodles"],
                                  ["a slice of pizza", "some pizza"]], ["kitchen", "park", "restaurant", "train"]),
    (["is washing", "is cleaning"], [["the dishes", "some dishes"], ["a car"], ["a dog"], ["the windows"]],
     ["kitchen", "street", "garden"]),
    (["is painting"], [["a fence"], ["a portrait"], ["a wall"], ["a landscape"]], ["garden", "street", "school"]),
    (["is kicking", "is playing with"], [["a football", "a soccer ball"], ["a beach ball"]],
     ["park", "beach", "field"]),
    (["is throwing", "is tossing"], [["a ball"], ["a frisbee"], ["a stick"]], ["park", "beach", "field"]),
    (["is writing", "is typing"], [["an email", "an e-mail"], ["a report"], ["a message"]],
     ["library", "train", "bedroom", "school"]),
    (["is carrying", "is holding"], [["a baby", "an infant"], ["a suitcase"], ["a box"], ["a basket"]],
     ["street", "train", "park"]),
]
STS_PLACES = {
    "kitchen": ["in a kitchen", "in the kitchen"], "restaurant": ["in a restaurant"],
    "stage": ["on a stage", "on stage"], "park": ["in a park", "in the park"], "street": ["on the street",
    "on a street", "outside on the road"], "bedroom": ["in a bedroom"], "school": ["at school", "in a classroom"],
    "beach": ["on the beach", "at the beach"], "field": ["in a field", "in a grassy field"],
    "train": ["on a train"], "library": ["in a library", "at the library"], "garden": ["in the garden",
    "in a garden"],
}


def _sts_sentence(rng, subj, verb, obj, place, front=False):
    s = f"{subj} {verb} {obj}"
    if place is None:
        return s + "."
    if front:
        return f"{cap(place)}, {subj[0].lower() + subj[1:]} {verb} {obj}."
    return f"{s} {place}."


def _sts_pair(rng: random.Random):
    si = rng.randrange(len(STS_SUBJECTS))
    ai = rng.randrange(len(STS_ACTIVITIES))
    verbs, objs, places = STS_ACTIVITIES[ai]
    oi = rng.randrange(len(objs))
    pk = pick(rng, places)
    subj_a = pick(rng, STS_SUBJECTS[si])
    s1 = _sts_sentence(rng, subj_a, pick(rng, verbs), pick(rng, objs[oi]), pick(rng, STS_PLACES[pk]))
    kind = rng.choices(["para", "place", "noplace", "object", "subject", "activity", "subj_only", "place_only",
                        "unrelated"], weights=[14, 12, 8, 14, 10, 12, 10, 8, 12])[0]
    sv, so = pick(rng, verbs), pick(rng, objs[oi])
    if kind == "para":
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), sv, so, pick(rng, STS_PLACES[pk]), rng.random() < 0.4)
        base = 4.8
    elif kind == "noplace":
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), sv, so, None)
        base = 4.2
    elif kind == "place":
        other = [p for p in places if p != pk]
        if not other:
            return None
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), sv, so, pick(rng, STS_PLACES[pick(rng, other)]))
        base = 3.6
    elif kind == "subject":
        sj = pick(rng, [i for i in range(len(STS_SUBJECTS)) if i != si])
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[sj]), sv, so, pick(rng, STS_PLACES[pk]))
        base = 3.2
    elif kind == "object":
        if len(objs) < 2:
            return None
        oj = pick(rng, [i for i in range(len(objs)) if i != oi])
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), sv, pick(rng, objs[oj]), pick(rng, STS_PLACES[pk]))
        base = 2.8
    elif kind == "activity":
        cands = [j for j, a in enumerate(STS_ACTIVITIES) if j != ai and pk in a[2]]
        if not cands:
            return None
        v2, o2, _ = STS_ACTIVITIES[pick(rng, cands)]
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), pick(rng, v2), pick(rng, pick(rng, o2)),
                           pick(rng, STS_PLACES[pk]))
        base = 1.8
    elif kind == "subj_only":
        v2, o2, p2 = STS_ACTIVITIES[pick(rng, [j for j in range(len(STS_ACTIVITIES)) if j != ai])]
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[si]), pick(rng, v2), pick(rng, pick(rng, o2)),
                           pick(rng, STS_PLACES[pick(rng, p2)]))
        base = 1.2
    elif kind == "place_only":
        cands = [j for j, a in enumerate(STS_ACTIVITIES) if j != ai and pk in a[2]]
        if not cands:
            return None
        v2, o2, _ = STS_ACTIVITIES[pick(rng, cands)]
        sj = pick(rng, [i for i in range(len(STS_SUBJECTS)) if i != si])
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[sj]), pick(rng, v2), pick(rng, pick(rng, o2)),
                           pick(rng, STS_PLACES[pk]))
        base = 0.9
    else:
        v2, o2, p2 = STS_ACTIVITIES[pick(rng, [j for j in range(len(STS_ACTIVITIES)) if j != ai])]
        sj = pick(rng, [i for i in range(len(STS_SUBJECTS)) if i != si])
        p2k = pick(rng, [p for p in p2 if p != pk] or p2)
        s2 = _sts_sentence(rng, pick(rng, STS_SUBJECTS[sj]), pick(rng, v2), pick(rng, pick(rng, o2)),
                           pick(rng, STS_PLACES[p2k]))
        base = 0.2
    if s1 == s2:
        return None
    score = round(min(5.0, max(0.0, base + rng.uniform(-0.3, 0.3))), 1)
    if kind == "para" and norm_key(s1) == norm_key(s2.replace(",", "")):
        score = 5.0
    if rng.random() < 0.5:
        s1, s2 = s2, s1
    return s1, s2, score


# Hand-written pairs beyond the scene grammar (news-like and everyday statements), with scores.
STS_HANDWRITTEN = [
    ("The city council approved the new budget on Tuesday.", "On Tuesday the council passed the new city budget.", 4.8),
    ("The city council approved the new budget on Tuesday.", "The council rejected the budget proposal.", 2.0),
    ("Heavy rain caused flooding in several villages.", "Several villages were flooded after heavy rain.", 4.8),
    ("Heavy rain caused flooding in several villages.", "The villages held a summer festival.", 0.6),
    ("The company reported higher profits this quarter.", "Profits at the firm rose in the latest quarter.", 4.6),
    ("The company reported higher profits this quarter.", "The company announced a new chief executive.", 1.4),
    ("A new bridge will connect the two towns.", "The two towns will be linked by a new bridge.", 5.0),
    ("A new bridge will connect the two towns.", "The old bridge between the towns was closed.", 2.2),
    ("The train to the airport leaves every twenty minutes.", "Airport trains depart every 20 minutes.", 4.8),
    ("The train to the airport leaves every twenty minutes.", "The airport bus leaves every hour.", 2.0),
    ("Scientists discovered a new species of frog in the rainforest.", "A previously unknown frog species was found in the rainforest.", 4.6),
    ("Scientists discovered a new species of frog in the rainforest.", "Scientists studied the effects of logging on rainforest frogs.", 2.4),
    ("She forgot her keys and had to wait outside.", "Because she had forgotten her keys, she waited outside.", 4.8),
    ("She forgot her keys and had to wait outside.", "She lost her wallet on the bus.", 1.0),
    ("The museum is free on the first Sunday of each month.", "Entry to the museum costs nothing on the first Sunday of every month.", 4.8),
    ("The museum is free on the first Sunday of each month.", "The museum is closed on Mondays.", 1.6),
    ("The concert was postponed because the singer was ill.", "The singer's illness led to the concert being postponed.", 4.6),
    ("The concert was postponed because the singer was ill.", "The concert sold out in ten minutes.", 1.2),
    ("He has worked at the hospital for thirty years.", "He has been employed by the hospital for three decades.", 4.8),
    ("He has worked at the hospital for thirty years.", "He retired from the hospital last year.", 2.6),
    ("The recipe calls for two cups of flour.", "You need two cups of flour for this recipe.", 4.8),
    ("The recipe calls for two cups of flour.", "The recipe calls for three eggs.", 2.2),
    ("Prices in the shops have risen sharply this year.", "This year shop prices went up steeply.", 4.6),
    ("Prices in the shops have risen sharply this year.", "The shops will close early on Friday.", 0.8),
    ("The team won the championship for the third time.", "It is the team's third championship title.", 4.4),
    ("The team won the championship for the third time.", "The team lost in the first round.", 1.6),
    ("Most of the passengers slept during the long flight.", "During the long flight, most passengers were asleep.", 4.8),
    ("Most of the passengers slept during the long flight.", "The flight was delayed by three hours.", 1.2),
    ("The library extended its opening hours.", "The library is now open for longer.", 4.4),
    ("The library extended its opening hours.", "The library added new books to its collection.", 1.8),
    ("A dog is running across a snowy field.", "A cat is sleeping on a windowsill.", 0.4),
    ("A child is blowing out candles on a birthday cake.", "A kid blows out the candles on a birthday cake.", 4.8),
    ("A child is blowing out candles on a birthday cake.", "A child is eating a slice of cake.", 2.6),
    ("Two men are fishing from a small boat.", "Two men are in a small boat, fishing.", 4.8),
    ("Two men are fishing from a small boat.", "Two women are rowing a boat.", 1.8),
    ("The farmer is feeding the chickens.", "The chickens are being fed by the farmer.", 5.0),
    ("The farmer is feeding the chickens.", "The farmer is driving a tractor.", 1.6),
    ("The stock market fell sharply on Monday.", "Share prices dropped steeply on Monday.", 4.4),
    ("The stock market fell sharply on Monday.", "The weather was sunny on Monday.", 0.2),
    ("A woman is peeling a potato.", "A woman is peeling potatoes.", 4.4),
]


def make_en_regression() -> None:
    rng = random.Random(1005)
    hand = list(STS_HANDWRITTEN)
    rng.shuffle(hand)
    gen = pool_unique(_sts_pair, 400 - len(hand), rng, key=lambda x: norm_key(x[0]) + "|" + norm_key(x[1]))
    # Keep every sentence pair (and its reverse) in one split only.
    rows = [list(x) for x in gen]
    train = rows[:300 - 30] + [list(x) for x in hand[:30]]
    dev = rows[300 - 30:] + [list(x) for x in hand[30:]]
    rng.shuffle(train)
    rng.shuffle(dev)
    pairs_train = {(a, b) for a, b, _ in train} | {(b, a) for a, b, _ in train}
    dev = [r for r in dev if (r[0], r[1]) not in pairs_train]
    emit_csv("en_regression/train.csv", ["sentence1", "sentence2", "score"], [[a, b, f"{s:.1f}"] for a, b, s in train])
    emit_csv("en_regression/dev.csv", ["sentence1", "sentence2", "score"], [[a, b, f"{s:.1f}"] for a, b, s in dev])
    for name, rs in (("train", train), ("dev", dev)):
        bins = Counter(min(4, int(s)) for *_, s in rs)
        SUMMARY.append(f"en_regression/{name}.csv: {len(rs)} rows; score bins " +
                       ", ".join(f"[{b},{b + 1}{']' if b == 4 else ')'}={bins[b]}" for b in range(5)))


# ============================================================================================
# 6. Long-document topic classification (data/long_docs): sports / business / science / politics
# ============================================================================================

LD_CITIES = ["Harlow Bay", "Eastmere", "Port Calder", "Brenton", "Ashford Vale", "Greyhaven", "Millbrook",
             "Corran", "Westfield Cross", "Dunmore", "Kestrel Point", "Lowther"]
LD_FIRST = ["Anna", "Tomas", "Helen", "Marcus", "Priya", "Joel", "Ruth", "Kwame", "Sofia", "Daniel", "Ines",
            "Victor", "Leah", "Owen", "Nadia", "Felix", "Carmen", "Isaac", "Maya", "Rowan"]
LD_LAST = ["Hale", "Okafor", "Lindqvist", "Moreau", "Castell", "Brandt", "Nakamura", "Ferris", "Adeyemi",
           "Whitlock", "Sorensen", "Quill", "Marsh", "Petrov", "Ellery", "Vance", "Draycott", "Osei"]
LD_TEAMS = ["Harlow Bay Rovers", "Eastmere Athletic", "Port Calder City", "Brenton United", "Greyhaven Harriers",
            "Millbrook Town", "Corran Wanderers", "Dunmore Albion"]
LD_COMPANIES = ["Calder Freight", "Brightwell Foods", "Northgate Bank", "Vanta Systems", "Orrin Textiles",
                "Halden Energy", "Meridian Retail Group", "Quayside Pharmaceuticals", "Tessel Motors"]
LD_UNIS = ["the University of Eastmere", "Port Calder Institute of Technology", "Greyhaven Medical School",
           "the Brenton Observatory", "the Kestrel Point Marine Laboratory", "Lowther University"]
LD_PARTIES = ["the Progressive Alliance", "the National Renewal Party", "the Civic Union", "the Green Coalition"]

# Topic-free filler: local colour, weather, people, places. Deliberately no sport, money, lab or vote words.
LD_FILLER = [
    "The morning was grey and damp, and the streets around the old market in {city} were quieter than usual.",
    "{person} has lived in {city} for most of {n} years and says the town has changed more in the last decade than in the thirty before it.",
    "A light rain had been falling since dawn, and the cafés along the harbour had pulled their chairs indoors.",
    "The old clock tower, repainted last spring, still runs four minutes slow, a fact that residents mention with some pride.",
    "Visitors arriving by the coastal road pass a row of fishing cottages that have stood there since the 1880s.",
    "On the corner of Mill Street, a bakery that opened in {year} still sells the same seeded loaf every morning.",
    "{person}, who runs a small bookshop near the station, said people had been talking about little else all week.",
    "Most of the town's older buildings are made of the pale local stone, which turns almost golden in the evening light.",
    "The bus from the station takes about twenty minutes, winding past allotments, a primary school and a long stretch of hedgerow.",
    "Several families had walked down to the seafront despite the wind, wrapped in coats and scarves.",
    "A mural of the river painted by local schoolchildren covers the side of the community hall.",
    "For many people in {city}, the week had started like any other, with the school run and the queue at the post office.",
    "The river was high after the weekend's rain, and the footpath along the eastern bank had been closed with a length of tape.",
    "{person} remembers when the high street had three butchers, two shoe shops and a cinema with a red velvet curtain.",
    "Gulls circled above the car park, and somewhere in the distance a dog barked at the delivery vans.",
    "The community garden behind the church now grows beans, courgettes and an enthusiastic crop of sunflowers.",
    "By mid-afternoon the clouds had cleared, and the light over the estuary turned silver.",
    "Neighbours on Orchard Lane have started a rota to walk elderly residents to the doctor's surgery.",
    "The town's annual lantern parade, which takes place in late autumn, draws visitors from across the county.",
    "An old railway line, closed in the 1960s, has been turned into a cycle path that runs for eleven miles along the valley.",
    "{person} said {pron} had been up since five, as {pron} is most days, feeding the hens and walking the dog along the shore.",
    "The smell of fresh coffee drifted out of a small kiosk by the ferry terminal.",
    "In the square, a man was tuning an accordion while two children chased pigeons around the fountain.",
    "Local historians say the first bridge across the river was a wooden structure built by a farmer who was tired of wading across.",
    "The library on Castle Road is busy most mornings, mostly with parents and toddlers for story time.",
    "Winter in {city} tends to be mild but windy, and the first frosts rarely arrive before December.",
    "{person} keeps a notebook of the birds that visit {poss} garden, and this year it includes a pair of goldfinches.",
    "Traffic on the ring road was slow, as it usually is on a Friday, and the queues stretched back past the garden centre.",
    "A new pedestrian crossing outside the primary school was finally installed after years of requests from parents.",
    "The view from the hill above {city} takes in the bay, the lighthouse and, on a clear day, the mountains to the north.",
    "People here still talk about the great storm of {year}, when the sea came over the wall and flooded the lower streets.",
    "The corner shop on Bell Street stays open until ten, and its owner knows most of his customers by name.",
    "The evening ferry was running late, and a small crowd gathered on the slipway to wait for it.",
    "There is a bench on the cliff path dedicated to a woman who, according to its plaque, 'loved this view every day of her life'.",
    "A string of bunting, left over from the summer fair, still hung between the lamp posts on Harbour Road.",
    "{person} described the town as 'the kind of place where everybody knows when you have had a haircut'.",
    "Children from the primary school had planted a row of cherry trees along the edge of the recreation ground.",
    "Most of the shops on the high street close at half past five, after which the town grows quiet very quickly.",
    "A church bell rang somewhere across the rooftops, marking the hour.",
    "The town's twinning association has organised exchanges with a village in the mountains for more than forty years.",
    "Fog rolled in from the bay late in the evening, softening the lights along the promenade.",
    "{person} walks the same route along the canal each morning, and says {pron} has not missed a day in six years.",
    "The old cinema, closed since {year}, is now used for craft fairs and, occasionally, for wedding receptions.",
    "Residents have been asking for a second pharmacy since the one on Quay Street reduced its opening hours.",
    "On the outskirts of town, sheep graze on the slopes below a line of old stone walls.",
    "A sign outside the village hall advertised a quiz night, a jumble sale and a talk about local wildflowers.",
    "{person} said: '{quote}'",
    "'{quote_c}' said {person}, who has run the newsagent's on the corner for {n2} years.",
    "As {person} put it while waiting for the bus: '{quote}'",
    "{person}, a retired teacher, was more philosophical. '{quote}'",
    "The hardware shop on Station Road still sells nails by weight, scooped from wooden drawers behind the counter.",
    "A group of walkers in bright waterproofs set off from the car park towards the hills.",
    "The allotments on the edge of town have a waiting list that, according to the secretary, runs to nine years.",
    "At the primary school, the children had been making paper boats to float on the pond at the end of term.",
    "The cobbled lane behind the church is too narrow for cars, so deliveries arrive by hand cart.",
    "A heron stood motionless in the shallows below the weir, ignoring the traffic on the bridge above.",
    "In the window of the charity shop, someone had arranged a tea set, a pair of wellington boots and a globe.",
    "The lifeboat crew held an open day, and dozens of children climbed aboard to try on the helmets.",
    "The lighthouse, no longer manned, is now looked after by a volunteer group that opens it to visitors in summer.",
    "Down by the harbour, the fishing boats were tied up three deep, their nets piled on the quay.",
    "Every Thursday a market fills the square with stalls selling cheese, flowers, second-hand records and hot pies.",
    "The village choir rehearses in the school hall on Tuesday evenings, and new members are always welcome.",
    "The path up to the ruined chapel is steep, but the view from the top is worth every step.",
    "A row of beach huts, each painted a different colour, lines the promenade at the western end of town.",
    "The café by the bandstand makes a lemon cake that regulars describe as the best in the county.",
    "When the tide goes out, the bay becomes a wide stretch of sand, dotted with pools and the occasional stranded crab.",
    "Mist hung over the water meadows until late morning, and the cows stood in it like grey shapes.",
    "{person} has been restoring an old rowing boat in {poss} garage for the past three winters.",
    "The smell of woodsmoke drifted across the valley as the first fires of the season were lit.",
    "A cat slept in the sunny window of the post office, as it apparently does every afternoon.",
    "The pub on the green has a framed photograph of the village in {year}, showing the same pub, the same green and a horse and cart.",
    "The footbridge over the stream was rebuilt by volunteers after it was washed away in a flood.",
    "Someone had chalked a hopscotch grid on the pavement outside the launderette.",
    "Twice a year the town's bell-ringers practise for a whole afternoon, and the sound carries for miles.",
    "The last train of the evening leaves just after eleven, and it is usually almost empty.",
    "The walled garden at the old manor house opens to the public on Sundays during the summer.",
    "A small museum above the tourist office displays old maps, fishing tackle and a stuffed pike of impressive size.",
    "Children were feeding the ducks at the pond while their parents chatted on the benches.",
    "The snow, when it comes, rarely settles for more than a day, but the children always manage a snowman.",
    "The road out of town climbs through beech woods that turn copper and gold in October.",
    "Long before the motorway was built, travellers stopped at the coaching inn that still stands on the old road.",
]
LD_QUOTES = [
    "You get used to the wind, eventually.", "Nothing much happens here, and that is how we like it.",
    "My grandmother used to say the weather changes every ten minutes, and she was right.",
    "People come for a weekend and end up staying for thirty years.", "It is a good place to grow up.",
    "Everyone waves at everyone, even if they are not quite sure who you are.",
    "The sea looks different every single morning.", "We have always looked after each other.",
    "Some things change, but the bakery never does.", "I would not live anywhere else.",
    "You can walk from one end of town to the other in twenty minutes, if nobody stops you for a chat.",
    "The summers are busy, the winters are quiet, and both have their charm.",
    "There is always someone to talk to at the bus stop.", "It is the kind of place where you leave your back door open.",
    "The best thing about this town is the view from the hill.", "We have had our ups and downs, like anywhere.",
]
LD_PREFIXES = ["", "", "", "Meanwhile, ", "Across town, ", "Not far away, ", "Elsewhere in town, ", "Nearby, "]

LD_TOPIC = {
    "sports": [
        "{team} beat {team2} {s1}-{s2} on {day}, with {person} scoring twice in the second half.",
        "The head coach, {person}, said after the match that the squad had finally found its rhythm.",
        "{person} has now scored {n} goals in {m} league appearances this season.",
        "The result leaves {team} three points clear at the top of the table with {k} matches to play.",
        "A crowd of {crowd} watched the derby, the largest attendance at the ground in a decade.",
        "The captain limped off with a hamstring injury in the first half and is expected to miss the cup semi-final.",
        "The referee awarded a penalty in stoppage time after a lengthy review by the video assistant.",
        "{team2} had dominated possession but managed only two shots on target all afternoon.",
        "The club's academy has produced four first-team players in the last two seasons.",
        "Tickets for the final at the national stadium sold out within an hour of going on sale.",
        "The goalkeeper made a string of saves in extra time before the match went to penalties.",
        "The transfer window closes on Friday, and {team} are reported to be chasing a new striker.",
        "In the women's league, {team2} extended their unbeaten run to {k} games.",
        "The marathon in {city} attracted more than {crowd} runners, and the course record fell by almost a minute.",
        "{person}, the veteran midfielder, announced that this would be {poss} final season as a professional.",
        "Fans sang throughout the second half as their side pressed for an equaliser.",
        "The manager rotated the squad heavily ahead of the midweek cup tie.",
        "The cricket club's opening batsman scored an unbeaten century as the home side chased down the target.",
        "Ranked {k}th in the world, the tennis player came from a set down to win the title in three sets.",
        "The league will review the red card shown to the defender in the closing minutes.",
        "Both teams had chances in a frantic opening spell, but the first goal did not arrive until the 38th minute.",
        "The squad will travel to the training camp in the mountains for a week of fitness work before the new season.",
        "The cycling team's leader finished the mountain stage in second place and moved into the overall lead.",
        "Supporters' groups have criticised the decision to move the kick-off to a Monday evening.",
    ],
    "business": [
        "Shares in {company} rose {pct} percent after the firm reported quarterly revenue of {money}.",
        "{company}'s chief executive, {person}, told investors that demand had been stronger than expected.",
        "The company plans to open {k} new stores next year and create around {crowd} jobs.",
        "Analysts had expected a profit of {money}, but rising costs cut the margin sharply.",
        "The proposed merger between {company} and {company2} still needs approval from the competition regulator.",
        "Inflation slowed to {pct2} percent last month, which economists say makes an interest rate cut more likely.",
        "The central bank held its benchmark rate steady for the third meeting in a row.",
        "{company} said it would cut its dividend to fund investment in new factories.",
        "Sales in the retail sector fell for a second consecutive month as households tightened their budgets.",
        "The board approved a share buyback worth {money}.",
        "{company2} issued a profit warning, blaming higher energy bills and weaker export orders.",
        "Investors sold off technology stocks as bond yields climbed to their highest level in a year.",
        "The firm's annual report showed that debt had fallen to {money}, its lowest level since the pandemic.",
        "Small businesses in {city} say the rise in commercial rents has made it harder to keep staff.",
        "The supermarket chain reported that its own-brand products now account for half of all sales.",
        "{person}, the chief financial officer, said the company would focus on cash flow rather than growth this year.",
        "The airline raised its full-year earnings forecast after a record summer for bookings.",
        "Venture capital investment in the region's start-ups fell by {pct} percent compared with last year.",
        "The company's shares have lost a third of their value since the chief executive left in the spring.",
        "Unions at the plant are negotiating a pay deal after the company posted record profits.",
        "Economists warned that the trade dispute could push up import prices for manufacturers.",
        "The bank's mortgage lending grew strongly in the first half, helped by a price war among lenders.",
        "The stock market closed {pct2} percent higher on Thursday, led by gains in energy and mining shares.",
        "The takeover values the family-owned firm at around {money}, including debt.",
    ],
    "science": [
        "Researchers at {uni} have identified a protein that appears to slow the growth of certain tumours in mice.",
        "The study, published this week in a peer-reviewed journal, followed {crowd} volunteers for {k} years.",
        "Astronomers using the new telescope detected water vapour in the atmosphere of a planet orbiting a nearby star.",
        "{person}, who led the research, said the findings still need to be confirmed in larger trials.",
        "The team sequenced the genome of the rare orchid and found that it had lost most of its photosynthesis genes.",
        "Measurements taken at the ocean floor showed temperatures {pct2} degrees higher than records from the 1990s.",
        "The experiment used a particle accelerator to collide lead ions at nearly the speed of light.",
        "Fossils found in the quarry suggest that feathered dinosaurs lived in the region earlier than thought.",
        "The researchers trained a machine-learning model on millions of microscope images to spot infected cells.",
        "A vaccine candidate produced a strong immune response in an early clinical trial with {crowd} participants.",
        "Satellite data show that the glacier has retreated by more than a kilometre in the past twenty years.",
        "The laboratory's new electron microscope can resolve individual atoms in a crystal.",
        "Geologists installed seismometers around the volcano after a swarm of small earthquakes.",
        "The paper describes a battery chemistry that could store twice as much energy as current lithium-ion cells.",
        "{person}, a physicist at {uni}, said the measurement was the most precise ever made of the constant.",
        "The probe will reach the outer planets in {k} years and send back images of their moons.",
        "Ecologists counted the birds at {k} sites and found that numbers had fallen sharply where hedgerows were removed.",
        "Samples of the bacteria were grown in the lab and exposed to a range of antibiotics.",
        "The researchers caution that the effect was observed in cell cultures and may not occur in humans.",
        "The discovery of the enzyme could lead to cheaper ways of breaking down plastic waste.",
        "The team's computer simulations reproduced the pattern of ocean currents seen in the observations.",
        "A grant from the national research council will fund the next phase of the project.",
        "The findings challenge a widely held hypothesis about how memories are stored in the brain.",
        "Chemists synthesised the compound in just five steps, compared with fourteen in the original method.",
    ],
    "politics": [
        "{party} announced its manifesto on {day}, promising to cut income tax and build {crowd} new homes.",
        "Parliament voted {v1} to {v2} in favour of the bill after a heated debate that lasted into the night.",
        "The minister for transport, {person}, faced questions about the delayed rail project.",
        "Opposition leaders accused the government of breaking its promise on hospital funding.",
        "A new poll puts {party} {pct} points ahead with less than a month until the general election.",
        "The prime minister reshuffled the cabinet, bringing {person} in as foreign secretary.",
        "Voters in {city} will elect a new mayor in May after the incumbent announced {poss} retirement.",
        "The committee's report criticised the handling of the procurement contracts.",
        "{person}, the leader of {party}, said the coalition talks had broken down over immigration policy.",
        "The senate rejected the amendment, sending the legislation back to the lower house.",
        "Thousands of people marched through the capital to protest against the proposed pension reforms.",
        "The government said it would hold a referendum on the electoral system within two years.",
        "Campaigners delivered a petition with {crowd} signatures to the prime minister's office.",
        "The party's candidate conceded defeat shortly after midnight as the results came in.",
        "Turnout in the by-election was just {pct} percent, the lowest in the constituency's history.",
        "The foreign ministers of both countries signed an agreement on border cooperation.",
        "The budget includes new spending on defence, schools and local councils.",
        "The speaker of the house suspended the session after members refused to withdraw their remarks.",
        "Constitutional lawyers say the emergency powers could be challenged in the supreme court.",
        "The governing coalition holds a majority of just three seats in the assembly.",
        "{person} resigned from the cabinet, saying {pron} could not support the government's new policy.",
        "Ministers are expected to publish draft legislation on the reforms before the summer recess.",
        "The opposition tabled a motion of no confidence, which will be debated next week.",
        "Local councillors voted to approve the regional devolution deal after months of negotiation.",
    ],
}
# Opening lines that announce the topic (used when evidence is spread from the start).
LD_HEADLINES = {
    "sports": ["{team} go top after derby win", "Late penalty settles cup tie in {city}", "Veteran midfielder {person} to retire at season's end",
               "Record field for {city} marathon"],
    "business": ["{company} shares jump on strong results", "{company} and {company2} agree merger terms",
                 "Retail sales slide as shoppers cut back", "Interest rate cut edges closer"],
    "science": ["Telescope finds water on distant world", "New enzyme could break down plastic waste",
                "Researchers at {uni} report tumour breakthrough in mice", "Glacier retreat accelerates, satellite data show"],
    "politics": ["{party} unveils election manifesto", "Parliament passes housing bill after late-night vote",
                 "Minister {person} resigns over policy row", "Coalition talks collapse in the capital"],
}
# Neutral openings for documents whose decisive evidence is only in the tail.
LD_NEUTRAL_HEADLINES = ["A week in {city}", "Letter from {city}", "Life on the coast: {city} in the rain",
                        "Notes from the high street", "{city}, slowly", "The view from {city}"]


def _ld_fill(rng: random.Random, tmpl: str) -> str:
    first, last = pick(rng, LD_FIRST), pick(rng, LD_LAST)
    fem = first in ("Anna", "Helen", "Priya", "Ruth", "Sofia", "Ines", "Leah", "Nadia", "Carmen", "Maya")
    team, team2 = rng.sample(LD_TEAMS, 2)
    company, company2 = rng.sample(LD_COMPANIES, 2)
    v1 = rng.randint(280, 360)
    quote = pick(rng, LD_QUOTES)
    return tmpl.format(
        city=pick(rng, LD_CITIES), person=f"{first} {last}", pron="she" if fem else "he", poss="her" if fem else "his",
        quote=quote, quote_c=quote[:-1] + "," if quote.endswith(".") else quote, n2=rng.randint(6, 35),
        n=rng.randint(20, 70), year=rng.randint(1952, 1999), team=team, team2=team2, s1=rng.randint(2, 4),
        s2=rng.randint(0, 1), day=pick(rng, ["Saturday", "Sunday", "Tuesday", "Wednesday"]), m=rng.randint(20, 40),
        k=rng.randint(3, 12), crowd=f"{rng.randint(3, 60) * 1000:,}", company=company, company2=company2,
        pct=rng.randint(3, 19), pct2=f"{rng.randint(1, 4)}.{rng.randint(1, 9)}",
        money=f"£{rng.randint(12, 900)} million", uni=pick(rng, LD_UNIS), party=pick(rng, LD_PARTIES),
        v1=v1, v2=v1 - rng.randint(20, 120))


def _ld_paragraph(rng: random.Random, bank: list[str], used: dict, n_sent: int) -> str:
    """n_sent sentences from bank, preferring templates this document has used least."""
    out = []
    for _ in range(n_sent):
        least = min(used.get(t, 0) for t in bank)
        tmpl = pick(rng, [t for t in bank if used.get(t, 0) == least])
        used[tmpl] = used.get(tmpl, 0) + 1
        s_ = _ld_fill(rng, tmpl)
        if bank is LD_FILLER and not s_.startswith(("'", "{")) and rng.random() < 0.3:
            pre = pick(rng, LD_PREFIXES)
            if pre and not s_.startswith(tuple(LD_FIRST)):
                s_ = pre + s_[0].lower() + s_[1:]
        out.append(s_.replace("s's ", "s' "))
    return cap(" ".join(out))


def _ld_doc(rng: random.Random, label: str, style: str, target_words: int) -> str:
    used: dict[str, int] = {}
    topic = LD_TOPIC[label]
    paras: list[str] = []

    def wc():
        return sum(words(p) for p in paras)

    if style == "spread":
        paras.append(_ld_fill(rng, pick(rng, LD_HEADLINES[label])).replace("s's ", "s' ") + ".")
        paras.append(_ld_paragraph(rng, topic, used, rng.randint(3, 5)))
        while wc() < target_words - 90:
            bank = topic if rng.random() < 0.45 else LD_FILLER
            paras.append(_ld_paragraph(rng, bank, used, rng.randint(3, 6)))
        paras.append(_ld_paragraph(rng, topic, used, rng.randint(2, 4)))
    else:
        # "tail": neutral headline and body; the first on-topic sentence comes only in the last ~100-160 words.
        # "distractor": like tail, but an early paragraph also mentions a different topic in passing.
        paras.append(_ld_fill(rng, pick(rng, LD_NEUTRAL_HEADLINES)) + ".")
        tail_words = rng.randint(100, 160)
        while wc() < target_words - tail_words:
            paras.append(_ld_paragraph(rng, LD_FILLER, used, rng.randint(3, 6)))
        if style == "distractor":
            other = pick(rng, [x for x in LD_TOPIC if x != label])
            pos = rng.randint(1, min(3, len(paras)))
            mixed = _ld_paragraph(rng, LD_FILLER, used, 2) + " " + _ld_paragraph(rng, LD_TOPIC[other], used, 1)
            paras.insert(pos, mixed)
        body = wc()
        while wc() - body < tail_words:
            paras.append(_ld_paragraph(rng, topic, used, rng.randint(3, 5)))
    while wc() < 310:
        paras.insert(2, _ld_paragraph(rng, LD_FILLER, used, 3))
    return "\n\n".join(paras)


def make_long_docs() -> None:
    rng = random.Random(1006)
    labels = ["sports", "business", "science", "politics"]
    styles = ["spread"] * 5 + ["tail"] * 3 + ["distractor"] * 2

    def one(i: int) -> dict:
        lab = labels[i % 4]
        style = styles[(i // 4) % len(styles)]
        # Lengths 300..3000 words, skewed towards the shorter end.
        target = int(300 * 10 ** (rng.random() ** 1.6))
        text = _ld_doc(rng, lab, style, target)
        return {"text": text, "label": lab, "style": style}

    docs = [one(i) for i in range(160)]
    for d in docs:
        n = words(d["text"])
        assert 300 <= n <= 3100, n
    train, dev = [], []
    for lab in labels:  # stratified: 30 train / 10 dev per label, evidence styles mixed in both
        ds = [d for d in docs if d["label"] == lab]
        rng.shuffle(ds)
        train += ds[:30]
        dev += ds[30:]
    rng.shuffle(train)
    rng.shuffle(dev)
    emit_jsonl("long_docs/train.jsonl", [{"text": d["text"], "label": d["label"]} for d in train])
    emit_jsonl("long_docs/dev.jsonl", [{"text": d["text"], "label": d["label"]} for d in dev])
    for name, ds in (("train", train), ("dev", dev)):
        wl = sorted(words(d["text"]) for d in ds)
        SUMMARY.append(f"long_docs/{name}.jsonl: {len(ds)} docs ({dist(d['label'] for d in ds)}); words "
                       f"{wl[0]}-{wl[-1]} (median {wl[len(wl) // 2]}); evidence styles {dist(d['style'] for d in ds)}")


# ============================================================================================
# 10. Unlabelled domain corpora for continued MLM pretraining (data/corpus)
# ============================================================================================
# Synthetic, educational-style text for language-model adaptation only: not medical or legal advice.

MED_DRUGS = [
    # name, class, indications, monitoring, key adverse effect
    ("warfarin", "vitamin K antagonist anticoagulant", "atrial fibrillation and venous thromboembolism",
     "the international normalised ratio (INR)", "bleeding"),
    ("apixaban", "direct oral anticoagulant that inhibits factor Xa", "stroke prevention in atrial fibrillation",
     "renal function and haemoglobin", "bleeding"),
    ("unfractionated heparin", "parenteral anticoagulant", "acute pulmonary embolism",
     "the activated partial thromboplastin time", "heparin-induced thrombocytopenia"),
    ("enoxaparin", "low-molecular-weight heparin", "prophylaxis of deep vein thrombosis",
     "anti-Xa activity in patients with renal impairment", "bleeding"),
    ("aspirin", "antiplatelet agent", "secondary prevention after myocardial infarction",
     "symptoms of gastrointestinal bleeding", "gastrointestinal haemorrhage"),
    ("clopidogrel", "P2Y12 receptor antagonist", "acute coronary syndrome",
     "bleeding and platelet function in selected cases", "bleeding"),
    ("metoprolol", "cardioselective beta-blocker", "angina, heart failure and rate control in atrial fibrillation",
     "heart rate and blood pressure", "bradycardia"),
    ("atorvastatin", "HMG-CoA reductase inhibitor", "hypercholesterolaemia and cardiovascular risk reduction",
     "liver enzymes and lipid profile", "myopathy"),
    ("metformin", "biguanide", "type 2 diabetes mellitus", "renal function and glycated haemoglobin",
     "gastrointestinal upset and, rarely, lactic acidosis"),
    ("amoxicillin", "penicillin antibiotic", "community-acquired pneumonia", "clinical response and allergy history",
     "hypersensitivity reactions"),
    ("vancomycin", "glycopeptide antibiotic", "infections caused by meticillin-resistant Staphylococcus aureus",
     "trough serum concentrations", "nephrotoxicity"),
    ("gentamicin", "aminoglycoside antibiotic", "severe Gram-negative sepsis", "serum drug concentrations",
     "nephrotoxicity and ototoxicity"),
    ("digoxin", "cardiac glycoside", "rate control in atrial fibrillation and symptomatic heart failure",
     "serum digoxin concentration and potassium", "toxicity, especially in hypokalaemia"),
    ("furosemide", "loop diuretic", "fluid overload in heart failure", "electrolytes and renal function",
     "hypokalaemia and dehydration"),
    ("lisinopril", "angiotensin-converting enzyme inhibitor", "hypertension and heart failure",
     "serum creatinine and potassium", "dry cough and, rarely, angioedema"),
    ("alteplase", "thrombolytic agent", "acute ischaemic stroke within a defined time window",
     "neurological status and blood pressure", "intracranial haemorrhage"),
]
MED_CONDITIONS = ["myocardial infarction", "atrial fibrillation", "heart failure", "deep vein thrombosis",
                  "pulmonary embolism", "type 2 diabetes mellitus", "chronic kidney disease",
                  "community-acquired pneumonia", "hypertension", "ischaemic stroke", "sepsis"]
MED_GENERAL = [
    "Pharmacokinetics describes what the body does to a drug: absorption, distribution, metabolism and excretion.",
    "Pharmacodynamics, by contrast, describes what the drug does to the body, including receptor binding and downstream effects.",
    "Bioavailability is the fraction of an administered dose that reaches the systemic circulation unchanged.",
    "After intravenous administration bioavailability is by definition complete, whereas oral absorption may be reduced by first-pass hepatic metabolism.",
    "The elimination half-life is the time taken for the plasma concentration to fall by half, and steady state is usually reached after four to five half-lives.",
    "The volume of distribution relates the total amount of drug in the body to its plasma concentration.",
    "Clearance determines the maintenance dose needed to sustain a target plasma concentration.",
    "A loading dose may be given when a drug has a long half-life and a rapid therapeutic effect is required.",
    "Drugs with a narrow therapeutic index, such as warfarin, digoxin and gentamicin, require careful therapeutic drug monitoring.",
    "Many drugs are metabolised by hepatic cytochrome P450 enzymes, particularly CYP3A4, CYP2C9 and CYP2D6.",
    "Enzyme inducers can reduce the plasma concentration of co-administered drugs, while enzyme inhibitors can increase it.",
    "Renal impairment prolongs the half-life of drugs that are cleared predominantly by the kidneys.",
    "Dose adjustment in chronic kidney disease is usually guided by the estimated glomerular filtration rate or creatinine clearance.",
    "Protein binding affects the free fraction of a drug, which is the pharmacologically active portion.",
    "Genetic polymorphisms in drug-metabolising enzymes explain part of the variability in response between patients.",
    "Elderly patients often have reduced renal clearance and altered body composition, which changes drug distribution.",
    "Polypharmacy increases the risk of drug interactions and adverse drug reactions.",
    "An anticoagulant reduces the formation of fibrin clots, whereas an antiplatelet agent reduces platelet aggregation.",
    "The choice of anticoagulant depends on the indication, renal function, bleeding risk and patient preference.",
    "Direct oral anticoagulants have more predictable pharmacokinetics than vitamin K antagonists and do not require routine INR monitoring.",
    "Reversal agents are available for several anticoagulants and are used in life-threatening bleeding.",
    "Acute myocardial infarction typically presents with central chest pain, sweating and breathlessness, although older and diabetic patients may present atypically.",
    "Serial troponin measurements and a twelve-lead electrocardiogram are central to the diagnosis of myocardial infarction.",
    "ST-elevation myocardial infarction is treated with urgent reperfusion, preferably by primary percutaneous coronary intervention.",
    "After myocardial infarction, secondary prevention usually includes antiplatelet therapy, a statin, a beta-blocker and an ACE inhibitor.",
    "Echocardiography after myocardial infarction assesses left ventricular function and guides further treatment.",
    "Atrial fibrillation increases the risk of ischaemic stroke because blood stagnates in the left atrial appendage.",
    "In atrial fibrillation, the decision to start an anticoagulant is guided by weighing the risk of stroke against the risk of bleeding.",
    "Deep vein thrombosis is usually diagnosed by compression ultrasonography, often after a D-dimer test.",
    "Pulmonary embolism may present with sudden breathlessness, pleuritic chest pain, tachycardia or collapse.",
    "Computed tomography pulmonary angiography is the usual imaging test for suspected pulmonary embolism.",
    "Heart failure with reduced ejection fraction is treated with medicines that improve survival, not only symptoms.",
    "In community-acquired pneumonia, severity scores help to decide between treatment at home and admission to hospital.",
    "Sepsis is a life-threatening organ dysfunction caused by a dysregulated host response to infection.",
    "Early antibiotics, fluid resuscitation and source control are the cornerstones of sepsis management.",
    "Blood cultures should ideally be taken before the first dose of antibiotic is given.",
    "Glycated haemoglobin reflects average blood glucose over the preceding two to three months.",
    "Hypertension is often asymptomatic and is detected by routine blood pressure measurement.",
    "Ambulatory blood pressure monitoring helps to exclude white-coat hypertension.",
    "Thrombolysis for ischaemic stroke must be preceded by brain imaging to exclude haemorrhage.",
    "Hypokalaemia increases the risk of digoxin toxicity and of cardiac arrhythmias.",
    "Patients taking an anticoagulant should be asked about falls, alcohol intake and other medicines that increase bleeding risk.",
    "Medication reconciliation at admission and discharge reduces prescribing errors.",
    "Adherence to long-term medication falls over time, particularly when treatment is preventive and symptoms are absent.",
    "Clinical pharmacists contribute to medication review, therapeutic drug monitoring and patient counselling.",
    "Randomised controlled trials provide the strongest evidence for the efficacy of a new treatment.",
    "Observational studies can identify rare adverse effects that were not detected in clinical trials.",
    "Post-marketing surveillance relies on clinicians reporting suspected adverse drug reactions.",
]
MED_DRUG_TEMPLATES = [
    "{Drug} is a {cls} used mainly for {ind}.",
    "Patients receiving {drug} should have {mon} checked at appropriate intervals.",
    "The most important adverse effect of {drug} is {adv}.",
    "The pharmacokinetics of {drug} are altered in renal and hepatic impairment, and doses may need to be adjusted.",
    "Before starting {drug}, clinicians review the indication, contraindications and potential drug interactions.",
    "In clinical practice, {drug} is often prescribed alongside other cardiovascular medicines, which increases the importance of medication review.",
    "Counselling for patients taking {drug} covers the purpose of treatment, the expected duration and the warning signs of {adv}.",
    "Studies of {drug} in older adults have emphasised the need for careful monitoring of {mon}.",
    "The half-life of {drug} influences how quickly a steady state is reached and how long its effect persists after stopping.",
    "When {drug} is combined with another agent that increases the risk of {adv}, the balance of benefit and harm should be reassessed.",
    "Guidelines describe the place of {drug} in the management of {ind}.",
    "Missed doses of {drug} are a common problem, and patients should be given clear written advice.",
]
MED_CASES = [
    "A {age}-year-old {sex} with a history of {cond} presented with {symptom}. {Pron} had been taking {drug} for several months. "
    "Investigations showed {finding}. The team reviewed {poss} medicines, and {drug} was {action}. {Pron} recovered and was discharged with a follow-up appointment.",
    "A {age}-year-old {sex} was admitted with {symptom}. The admitting doctor suspected {cond}. {finding_cap} "
    "Treatment with {drug} was started, and {mon} was monitored closely during the admission.",
    "In a case discussed at the weekly pharmacology meeting, a {age}-year-old {sex} taking {drug} developed {adv} after a new medicine was added. "
    "The interaction was recognised, the new medicine was stopped, and the event was reported as a suspected adverse drug reaction.",
]
MED_SYMPTOMS = ["central chest pain radiating to the left arm", "sudden breathlessness", "palpitations and dizziness",
                "a painful swollen calf", "fever, cough and confusion", "weakness of the right arm and slurred speech",
                "increasing ankle swelling and breathlessness on exertion", "black stools and fatigue"]
MED_FINDINGS = ["a raised troponin concentration", "atrial fibrillation with a rapid ventricular rate",
                "an elevated INR", "a reduced estimated glomerular filtration rate", "a low serum potassium",
                "consolidation on the chest radiograph", "a thrombus on compression ultrasonography",
                "a raised lactate and low blood pressure"]
MED_ACTIONS = ["temporarily withheld", "continued at a reduced dose", "replaced with an alternative agent",
               "continued with closer monitoring"]


def _med_paragraph(rng: random.Random, drug, cond: str) -> str:
    name, cls, ind, mon, adv = drug
    sents = []
    kind = rng.random()
    if kind < 0.3:
        sex = pick(rng, ["man", "woman"])
        t = pick(rng, MED_CASES)
        finding = pick(rng, MED_FINDINGS)
        sents.append(t.format(age=rng.randint(38, 91), sex=sex, cond=cond, symptom=pick(rng, MED_SYMPTOMS),
                              drug=name, finding=finding, finding_cap=cap(finding) + " was found.",
                              Pron="He" if sex == "man" else "She", poss="his" if sex == "man" else "her",
                              action=pick(rng, MED_ACTIONS), mon=mon, adv=adv))
        sents += rng.sample(MED_GENERAL, rng.randint(1, 2))
    else:
        n_d = rng.randint(1, 3)
        for t in rng.sample(MED_DRUG_TEMPLATES, n_d):
            sents.append(t.format(drug=name, Drug=cap(name), cls=cls, ind=ind, mon=mon, adv=adv))
        sents += rng.sample(MED_GENERAL, rng.randint(2, 5))
        rng.shuffle(sents)
    return " ".join(sents)


ZH_LAW_CONCEPTS = [
    "不可抗力是指不能预见、不能避免且不能克服的客观情况。",
    "因不可抗力不能履行合同的，根据不可抗力的影响，部分或者全部免除责任，但是法律另有规定的除外。",
    "当事人迟延履行后发生不可抗力的，不免除其违约责任。",
    "当事人一方因不可抗力不能履行合同的，应当及时通知对方，以减轻可能给对方造成的损失，并应当在合理期限内提供证明。",
    "向人民法院请求保护民事权利的诉讼时效期间为三年，法律另有规定的，依照其规定。",
    "诉讼时效期间自权利人知道或者应当知道权利受到损害以及义务人之日起计算。",
    "权利人向义务人提出履行请求、义务人同意履行义务或者权利人提起诉讼、申请仲裁的，诉讼时效中断，从中断时起重新计算。",
    "诉讼时效期间届满的，义务人可以提出不履行义务的抗辩。",
    "人民法院不得主动适用诉讼时效的规定。",
    "当事人可以约定一方违约时应当根据违约情况向对方支付一定数额的违约金，也可以约定因违约产生的损失赔偿额的计算方法。",
    "约定的违约金低于造成的损失的，人民法院或者仲裁机构可以根据当事人的请求予以增加。",
    "约定的违约金过分高于造成的损失的，人民法院或者仲裁机构可以根据当事人的请求予以适当减少。",
    "当事人就迟延履行约定违约金的，违约方支付违约金后，还应当履行债务。",
    "二人以上依法承担连带责任的，权利人有权请求部分或者全部连带责任人承担责任。",
    "连带责任人的责任份额根据各自责任大小确定；难以确定责任大小的，平均承担责任。",
    "实际承担责任超过自己责任份额的连带责任人，有权向其他连带责任人追偿。",
    "当事人在保证合同中约定保证人和债务人对债务承担连带责任的，为连带责任保证。",
    "定金的数额由当事人约定，但是不得超过主合同标的额的百分之二十，超过部分不产生定金的效力。",
    "给付定金的一方不履行债务或者履行债务不符合约定，致使不能实现合同目的的，无权请求返还定金。",
    "收受定金的一方不履行债务或者履行债务不符合约定，致使不能实现合同目的的，应当双倍返还定金。",
    "当事人既约定违约金，又约定定金的，一方违约时，对方可以选择适用违约金或者定金条款。",
    "当事人一方不履行合同义务或者履行合同义务不符合约定的，应当承担继续履行、采取补救措施或者赔偿损失等违约责任。",
    "当事人一方违约后，对方应当采取适当措施防止损失的扩大；没有采取适当措施致使损失扩大的，不得就扩大的损失请求赔偿。",
    "依法成立的合同，自成立时生效，但是法律另有规定或者当事人另有约定的除外。",
    "当事人协商一致，可以解除合同。",
    "合同解除后，尚未履行的，终止履行；已经履行的，根据履行情况和合同性质，当事人可以请求恢复原状或者采取其他补救措施。",
    "当事人对自己提出的主张，有责任提供证据。",
    "当事人约定仲裁条款的，一方向人民法院起诉，人民法院一般不予受理，但仲裁协议无效的除外。",
    "行为人因过错侵害他人民事权益造成损害的，应当承担侵权责任。",
    "债务人怠于行使其债权或者与该债权有关的从权利，影响债权人的到期债权实现的，债权人可以向人民法院请求以自己的名义代位行使。",
]
ZH_LAW_COMPANIES = ["华盛贸易有限公司", "远航物流有限公司", "鼎新建筑工程有限公司", "青禾农业科技有限公司", "金桥商贸有限公司",
                    "恒信机械制造有限公司", "润丰食品有限公司", "星海电子科技有限公司", "安达置业有限公司", "明德教育咨询有限公司"]
# (contract, what the defendant did, what the plaintiff claims)
ZH_LAW_DISPUTES = [
    ("买卖合同", "收货后未按约定期限支付货款", "支付货款{amt}及违约金"),
    ("买卖合同", "逾期三个月仍未交付货物", "解除合同、返还已付货款{amt}并支付违约金"),
    ("建设工程施工合同", "工程验收合格后拖欠工程款", "支付工程款{amt}及逾期付款违约金"),
    ("房屋租赁合同", "连续六个月未支付租金", "解除合同、支付欠付租金{amt}及违约金"),
    ("运输合同", "运输途中造成货物毁损", "赔偿货物损失{amt}"),
    ("借款合同", "借款到期后未归还本金及利息", "归还借款本金{amt}及利息，并由保证人承担连带责任"),
    ("技术服务合同", "收取服务费后未完成约定的系统开发", "返还服务费{amt}并支付违约金"),
    ("加工承揽合同", "交付的产品质量不符合约定标准", "赔偿损失{amt}"),
]
# (defence, court's reasoning): each reasoning answers its defence.
ZH_LAW_ARGS = [
    ("因突发疫情导致停工停产，属于不可抗力，应当免除责任",
     "被告未能举证证明其不能履行与疫情之间存在因果关系，亦未及时通知原告并提供证明，其关于不可抗力的免责抗辩不能成立"),
    ("因突发疫情导致停工停产，属于不可抗力，应当免除责任",
     "疫情防控措施确实导致被告在一定期间内无法履行，且被告已及时通知原告，对该期间的违约责任可予以部分免除，但此后的迟延履行不属于不可抗力的影响范围"),
    ("原告的起诉已经超过诉讼时效",
     "原告在诉讼时效期间内多次向被告发送催款函，诉讼时效因此中断并重新计算，被告关于超过诉讼时效的抗辩不能成立"),
    ("原告的起诉已经超过诉讼时效",
     "原告自知道权利受到损害之日起三年内未向被告主张权利，亦无诉讼时效中断、中止的情形，被告的诉讼时效抗辩成立，对原告的诉讼请求不予支持"),
    ("合同约定的违约金过分高于实际损失，请求予以减少",
     "合同约定的违约金明显过高，结合原告的实际损失、合同履行情况及当事人的过错程度，酌情予以调减"),
    ("合同约定的违约金过分高于实际损失，请求予以减少",
     "被告未能举证证明约定的违约金过分高于原告的实际损失，对其调减违约金的请求不予支持"),
    ("保证人仅提供一般保证，不应承担连带责任",
     "保证合同明确约定保证人承担连带责任保证，原告有权要求保证人与债务人共同承担还款的连带责任"),
    ("已经向原告支付了定金，不应再支付违约金",
     "双方既约定了违约金又约定了定金，原告选择适用违约金条款，符合法律规定，已付定金应当抵作价款或者予以返还"),
    ("原告未及时采取措施防止损失扩大，扩大的损失应由原告自行承担",
     "原告在得知违约后未采取适当措施防止损失扩大，对于扩大部分的损失不得请求被告赔偿"),
]
ZH_LAW_QA = [
    ("疫情期间无法按时交货，能否以不可抗力为由免责？",
     "应当结合具体情况判断。只有在不可抗力与不能履行之间存在因果关系，并且当事人及时通知对方、提供证明的情况下，才能部分或者全部免除责任。"),
    ("借钱给朋友没有约定还款日期，诉讼时效从什么时候开始计算？",
     "未约定履行期限的，债权人可以随时要求履行，诉讼时效期间一般从债权人要求履行的宽限期届满之日起计算。"),
    ("合同约定的违约金太高，可以要求减少吗？",
     "可以。约定的违约金过分高于造成的损失的，违约方可以请求人民法院或者仲裁机构予以适当减少。"),
    ("给别人的借款做了担保，会承担连带责任吗？",
     "要看保证合同的约定。约定连带责任保证的，债权人可以直接要求保证人承担责任；没有约定或者约定不明确的，按照一般保证承担保证责任。"),
    ("定金和订金有什么区别？",
     "定金具有担保性质，适用定金罚则；订金通常被视为预付款，不适用定金罚则。合同中使用的名称不同，法律后果也不同。"),
    ("诉讼时效过了，还能起诉吗？",
     "仍然可以起诉，人民法院也会受理，但对方提出诉讼时效抗辩的，权利人的请求可能得不到支持。"),
    ("房东提前收回房屋，租客能要求违约金吗？",
     "租赁合同约定了违约金的，租客可以依照约定主张违约金；没有约定的，可以请求赔偿因此造成的实际损失。"),
    ("公司欠款不还，股东需要承担连带责任吗？",
     "一般情况下股东以其认缴的出资额为限承担责任，但股东滥用公司法人独立地位逃避债务、严重损害债权人利益的，应当对公司债务承担连带责任。"),
]
ZH_LAW_COMMENTS = [
    "实践中，当事人援引不可抗力条款时，往往忽视通知义务和证明义务，导致免责主张得不到支持。",
    "诉讼时效制度的目的在于督促权利人及时行使权利，维护交易秩序的稳定。",
    "违约金兼具补偿性和一定的惩罚性，但以补偿性为主，因此法院在调整违约金时通常以实际损失为基础。",
    "在连带责任中，债权人可以选择向任何一个连带责任人主张全部债权，这对债权人的保护更加充分。",
    "律师提示，企业在签订合同时应当明确约定违约金的计算方法、不可抗力的范围以及争议解决方式。",
    "对于诉讼时效的中断，权利人应当注意保留催收的证据，例如催款函、聊天记录或者对方签字确认的对账单。",
    "司法实践中，违约金一般以不超过造成损失的百分之三十为限，超过的部分可能被认定为过分高于造成的损失。",
    "合同中的不可抗力条款不能随意扩大范围，正常的商业风险一般不属于不可抗力。",
    "担保人在签字之前，应当仔细阅读保证合同，明确自己承担的是一般保证还是连带责任保证。",
    "举证责任的分配直接影响案件的结果，当事人应当在举证期限内提交证据。",
    "仲裁具有一裁终局的特点，程序相对灵活，但当事人需要事先达成有效的仲裁协议。",
    "情势变更与不可抗力不同，前者是合同基础条件发生重大变化，继续履行对一方明显不公平。",
]


def _zh_law_paragraph(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.35:
        a, b = rng.sample(ZH_LAW_COMPANIES, 2)
        contract, breach, claim = pick(rng, ZH_LAW_DISPUTES)
        defence, holding = pick(rng, ZH_LAW_ARGS)
        while "保证人" in defence and "保证人" not in claim:
            defence, holding = pick(rng, ZH_LAW_ARGS)
        amt = f"{rng.randint(12, 980)}万元"
        return (f"原告{a}与被告{b}于{rng.randint(2016, 2022)}年{rng.randint(1, 12)}月签订《{contract}》，"
                f"约定了履行期限及违约金条款。合同履行过程中，被告{breach}，原告多次催告无果，遂诉至法院，"
                f"请求判令被告{claim.format(amt=amt)}。被告辩称，{defence}。法院经审理认为，{holding}。"
                + pick(rng, ZH_LAW_COMMENTS))
    if k < 0.55:
        q, a = pick(rng, ZH_LAW_QA)
        return f"问：{q}答：{a}" + pick(rng, ZH_LAW_COMMENTS)
    sents = rng.sample(ZH_LAW_CONCEPTS, rng.randint(2, 4)) + rng.sample(ZH_LAW_COMMENTS, rng.randint(1, 2))
    rng.shuffle(sents)
    return "".join(sents)


def make_corpora() -> None:
    rng = random.Random(1010)
    docs = []
    size = 0
    while size < 200_000:
        drug = pick(rng, MED_DRUGS)
        cond = pick(rng, MED_CONDITIONS)
        paras = [_med_paragraph(rng, drug, cond) for _ in range(rng.randint(2, 5))]
        doc = "\n".join(paras)
        docs.append(doc)
        size += len(doc.encode("utf-8")) + 2
    en = "\n\n".join(docs) + "\n"
    emit_text("corpus/en_medical.txt", en)
    rng = random.Random(1011)
    docs = []
    size = 0
    while size < 200_000:
        paras = [_zh_law_paragraph(rng) for _ in range(rng.randint(2, 5))]
        doc = "\n".join(paras)
        docs.append(doc)
        size += len(doc.encode("utf-8")) + 2
    zh = "\n\n".join(docs) + "\n"
    emit_text("corpus/zh_legal.txt", zh)
    for name, text, terms in (("en_medical.txt", en, ["pharmacokinetics", "myocardial infarction", "anticoagulant"]),
                              ("zh_legal.txt", zh, ["不可抗力", "诉讼时效", "连带责任", "违约金"])):
        n_docs = text.count("\n\n") + 1
        n_par = sum(1 for line in text.splitlines() if line.strip())
        counts = ", ".join(f"{t}×{text.lower().count(t)}" for t in terms)
        SUMMARY.append(f"corpus/{name}: {len(text.encode('utf-8')) // 1024} KB, {n_docs} documents, {n_par} paragraphs; {counts}")


# ============================================================================================
# 7. Named-entity recognition (data/ner): English CoNLL (PER/ORG/LOC/MISC, IOB2), Chinese char spans
# ============================================================================================

NER_EN_FIRST = ["Anna", "Tomas", "Helen", "Marcus", "Priya", "Joel", "Ruth", "Kwame", "Sofia", "Daniel", "Ines",
                "Victor", "Leah", "Owen", "Nadia", "Felix", "Carmen", "Isaac", "Maya", "Rowan", "Hiroshi", "Amara",
                "Lucas", "Freya", "Mateo", "Zainab", "Oskar", "Elif"]
NER_EN_LAST = ["Hale", "Okafor", "Lindqvist", "Moreau", "Castell", "Brandt", "Nakamura", "Ferris", "Adeyemi",
               "Whitlock", "Sorensen", "Quill", "Marsh", "Petrov", "Ellery", "Vance", "Draycott", "Osei",
               "van der Berg", "Al-Sayed", "Kowalski", "Tanaka", "Mendes"]
NER_EN_AGENCIES = ["United Nations", "European Commission", "World Health Organization", "Red Cross",
                   "International Monetary Fund", "UNESCO", "World Bank", "Interpol"]
NER_EN_UNIS = ["University of Eastmere", "Lowther University", "Port Calder Institute of Technology",
               "Greyhaven Medical School", "Brenton College of Art"]
NER_EN_TEAMS = ["Brenton United", "Harlow Bay Rovers", "Port Calder City", "Eastmere Athletic", "Corran Wanderers"]
NER_EN_COMPANIES = ["Northgate Bank", "Vanta Systems", "Calder Freight", "Brightwell Foods", "Halden Energy",
                    "Meridian Retail Group", "Quayside Pharmaceuticals", "Tessel Motors", "Orrin Textiles"]
NER_EN_CITIES = ["Paris", "Nairobi", "Lima", "Oslo", "New York", "Buenos Aires", "Kuala Lumpur", "Rotterdam", "Seoul",
                 "Vancouver", "Lisbon", "Helsinki", "Cape Town", "Hanoi", "Marrakesh", "Osaka", "Hamburg", "Santiago"]
NER_EN_COUNTRIES = ["Brazil", "Germany", "Japan", "Canada", "South Africa", "Morocco", "Chile", "New Zealand",
                    "Vietnam", "Norway", "Kenya", "Peru"]
NER_EN_NATURE = ["Lake Geneva", "Mount Kenya", "River Thames", "Danube", "Mekong", "Rhine", "Sahara", "Andes"]
NER_EN_NAT = ["German", "Brazilian", "Japanese", "French", "Kenyan", "Canadian", "Spanish", "Norwegian",
              "Moroccan", "Korean", "Chilean", "Dutch"]
NER_EN_EVENT = ["World Cup", "Olympic Games", "Tour de France", "Champions League", "Venice Biennale",
                "Climate Summit", "Commonwealth Games"]
NER_EN_AWARD = ["Nobel Prize", "Booker Prize", "Pulitzer Prize", "Fields Medal", "Golden Globe"]
NER_EN_LANG = ["Spanish", "Portuguese", "Swahili", "Mandarin", "Arabic", "French", "Korean"]
NER_EN_TEMPLATES = [
    "{PER} , the chief executive of {COMPANY} , said on {DAY} that the company would open a new office in {CITY} .",
    "{NAT} striker {PER} scored twice as {TEAM} beat {TEAM2} 3-1 in {CITY} .",
    "The {EVENT} will be held in {LOC} next year , organisers said .",
    "Shares in {COMPANY} rose 4 percent in {CITY} on {DAY} .",
    "{PER} won the {AWARD} for a novel set in {LOC} .",
    "{AGENCY} officials met representatives from {COMPANY} in {CITY} to discuss the plan .",
    "Speaking in {LANG} , {PER} thanked the crowd in {CITY} .",
    "{PER} and {PER2} will lead the {NAT} delegation at the {EVENT} .",
    "The {AGENCY} report was presented by {PER} at a conference in {CITY} .",
    "Police in {CITY} said they had arrested two men after a robbery on {DAY} .",
    "{COMPANY} agreed to buy {COMPANY2} for 2.4 billion dollars .",
    "{PER} , who grew up in {LOC} , joined {TEAM} in 2019 .",
    "Researchers at {UNI} said the results would be published next month .",
    "The {NAT} government has asked the {AGENCY} for emergency assistance after floods in {CITY} .",
    "{PER} told reporters in {CITY} that talks with the {AGENCY} had been constructive .",
    "Flights between {CITY} and {CITY2} were cancelled because of the storm .",
    "{TEAM} coach {PER} praised the young {NAT} defender after the match .",
    "The exhibition , which opens in {CITY} on {DAY} , includes works by {PER} .",
    "{PER} , a spokesperson for {COMPANY} , declined to comment .",
    "Prices fell sharply on {DAY} , according to figures released in {COUNTRY} .",
    "The film , shot in {LOC} , will premiere at the {EVENT} .",
    "{COMPANY} said profits had doubled thanks to strong sales in {COUNTRY} and {COUNTRY2} .",
    "The {NAT} cyclist {PER} finished second in the {EVENT} .",
    "{PER} has been appointed ambassador to {COUNTRY} .",
    "A new bridge across the {RIVER} is due to open in the spring .",
    "Officials said the meeting would take place in {CITY} later this month .",
    "{PER} studied {LANG} at {UNI} before moving to {CITY} .",
    "The talks in {CITY} ended without agreement on {DAY} .",
    "The {AGENCY} has opened an investigation into the accident near {CITY} .",
    "{PER} said the {NAT} economy was recovering faster than expected .",
    "More than 20,000 runners took part in the race , which finished in central {CITY} .",
    "The team arrived in {CITY} on {DAY} ahead of the {EVENT} .",
    "Climbers from {COUNTRY} reached the summit of {MOUNTAIN} on {DAY} .",
    "{PER} spent three months crossing the {DESERT} on foot .",
    "Tourists on the shores of {LAKE} watched the fireworks .",
    "{PER} of {UNI} led the study of {NAT} wine exports .",
    "The {TEAM} midfielder {PER} has been ruled out for six weeks .",
    "It rained heavily for most of the day , and the match was postponed .",
    "The meeting lasted more than four hours .",
    "{COMPANY} will cut 300 jobs , the company said in a statement .",
]
NER_EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ner_en_sentence(rng: random.Random):
    tmpl = pick(rng, NER_EN_TEMPLATES)
    person = lambda: f"{pick(rng, NER_EN_FIRST)} {pick(rng, NER_EN_LAST)}"  # noqa: E731
    teams = rng.sample(NER_EN_TEAMS, 2)
    comps = rng.sample(NER_EN_COMPANIES, 2)
    cities = rng.sample(NER_EN_CITIES, 2)
    countries = rng.sample(NER_EN_COUNTRIES, 2)
    fills = {
        "PER": (person(), "PER"), "PER2": (person(), "PER"), "AGENCY": (pick(rng, NER_EN_AGENCIES), "ORG"),
        "COMPANY": (comps[0], "ORG"), "COMPANY2": (comps[1], "ORG"), "TEAM": (teams[0], "ORG"),
        "TEAM2": (teams[1], "ORG"), "UNI": (pick(rng, NER_EN_UNIS), "ORG"),
        "CITY": (cities[0], "LOC"), "CITY2": (cities[1], "LOC"), "COUNTRY": (countries[0], "LOC"),
        "COUNTRY2": (countries[1], "LOC"), "LOC": (pick(rng, cities + countries), "LOC"),
        "RIVER": (pick(rng, ["River Thames", "Danube", "Mekong", "Rhine"]), "LOC"),
        "MOUNTAIN": (pick(rng, ["Mount Kenya", "Mont Blanc", "Aconcagua"]), "LOC"),
        "DESERT": (pick(rng, ["Sahara", "Gobi", "Atacama"]), "LOC"),
        "LAKE": (pick(rng, ["Lake Geneva", "Lake Como", "Lake Titicaca"]), "LOC"),
        "NAT": (pick(rng, NER_EN_NAT), "MISC"), "EVENT": (pick(rng, NER_EN_EVENT), "MISC"),
        "AWARD": (pick(rng, NER_EN_AWARD), "MISC"), "LANG": (pick(rng, NER_EN_LANG), "MISC"),
        "DAY": (pick(rng, NER_EN_DAYS), None),
    }
    tokens, tags = [], []
    for piece in tmpl.split():
        m = re.fullmatch(r"\{(\w+)\}", piece)
        if not m:
            tokens.append(piece)
            tags.append("O")
            continue
        text, typ = fills[m.group(1)]
        for i, tok in enumerate(text.split()):
            tokens.append(tok)
            tags.append("O" if typ is None else ("B-" if i == 0 else "I-") + typ)
    tokens[0] = cap(tokens[0]) if tags[0] == "O" else tokens[0]
    return tuple(tokens), tuple(tags)


def _conll(sents) -> str:
    out = ["-DOCSTART- O", ""]
    for toks, tags in sents:
        out += [f"{t} {g}" for t, g in zip(toks, tags)]
        out.append("")
    return "\n".join(out) + "\n"


NER_ZH_PER = ["张伟", "李娜", "王建国", "陈晓明", "刘芳", "赵磊", "孙丽华", "吴敏", "郑浩", "黄婷婷", "林志强", "何静",
              "高峰", "马文涛", "罗晨", "梁雪", "宋佳怡", "韩冬", "唐明远", "许可欣"]
NER_ZH_ORG = ["星海电子科技有限公司", "远航物流", "清华大学", "复旦大学", "中国科学院", "世界卫生组织", "联合国",
              "华盛贸易公司", "新华社", "浙江大学", "中国人民银行", "鼎新建筑", "青禾农业", "市人民医院", "国家统计局"]
NER_ZH_LOC = ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安", "云南省", "浙江省", "新疆", "青岛",
              "南京", "厦门", "重庆", "哈尔滨", "拉萨", "苏州"]
NER_ZH_CITY = ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安", "青岛", "南京", "厦门", "重庆"]
NER_ZH_RIVER = ["长江", "黄河", "珠江", "澜沧江"]
NER_ZH_SCENIC = ["西湖", "泰山", "黄山", "洱海", "九寨沟"]
NER_ZH_COUNTRY = ["日本", "法国", "巴西", "德国", "新加坡", "埃及"]
NER_ZH_TEMPLATES = [
    "{PER}在{LOC}出席了{ORG}举办的新闻发布会。",
    "{ORG}宣布将在{LOC}设立研发中心，由{PER}担任负责人。",
    "记者从{ORG}获悉，{LOC}今年的粮食产量再创新高。",
    "{PER}毕业于{ORG}，目前在{LOC}从事教育工作。",
    "昨天，{PER}和{PER2}一起参观了{LOC}的博物馆。",
    "据{ORG}消息，{LOC}将于下月举办国际马拉松比赛。",
    "{ORG}与{ORG2}签署了战略合作协议。",
    "{PER}表示，{ORG}将继续加大在{LOC}的投资。",
    "受强降雨影响，{LOC}部分地区出现内涝。",
    "来自{LOC}的游客{PER}说，这是自己第一次来{LOC2}。",
    "{PER}在{SCENIC}边拍下了这张照片。",
    "{SCENIC}景区国庆期间接待游客超过十万人次。",
    "{ORG}代表团前往{COUNTRY}访问，{PER}随团出访。",
    "{PER}从{COUNTRY}留学归来后，加入了{ORG}。",
    "{RIVER}流域迎来新一轮降雨，{ORG}发布预警。",
    "{ORG}的研究人员在{LOC}发现了一种新的植物。",
    "{PER}当选为{ORG}新一任主席。",
    "今年夏天，{LOC}迎来了大批游客。",
    "{PER}在接受{ORG}采访时谈到了自己的创业经历。",
    "{LOC}和{LOC2}之间的高铁线路预计明年通车。",
    "{ORG}发布的数据显示，{LOC}上半年经济增长较快。",
    "{PER}带领团队在{LOC}完成了这项实验。",
    "{PER}是{LOC}人，十年前加入{ORG}。",
    "{ORG}在{LOC}召开年度工作会议，{PER}作了报告。",
    "沿着{RIVER}一路向东，{PER}走访了十几个村庄。",
    "{PER}向{ORG}捐赠了一批图书。",
    "本次展览由{ORG}主办，将在{CITY}持续一个月。",
    "{PER}和{PER2}在{LOC}举行了婚礼。",
    "警方提醒{CITY}市民注意防范电信诈骗。",
    "{ORG}派出专家组前往{LOC}指导防汛工作。",
]


def _ner_zh_sentence(rng: random.Random):
    tmpl = pick(rng, NER_ZH_TEMPLATES)
    pers = rng.sample(NER_ZH_PER, 2)
    orgs = rng.sample(NER_ZH_ORG, 2)
    locs = rng.sample(NER_ZH_LOC, 2)
    fills = {"PER": (pers[0], "PER"), "PER2": (pers[1], "PER"), "ORG": (orgs[0], "ORG"), "ORG2": (orgs[1], "ORG"),
             "LOC": (locs[0], "LOC"), "LOC2": (locs[1], "LOC"), "CITY": (pick(rng, NER_ZH_CITY), "LOC"),
             "RIVER": (pick(rng, NER_ZH_RIVER), "LOC"), "SCENIC": (pick(rng, NER_ZH_SCENIC), "LOC"),
             "COUNTRY": (pick(rng, NER_ZH_COUNTRY), "LOC")}
    text, ents = "", []
    for part in re.split(r"(\{\w+\})", tmpl):
        m = re.fullmatch(r"\{(\w+)\}", part)
        if not m:
            text += part
            continue
        s_, typ = fills[m.group(1)]
        ents.append({"start": len(text), "end": len(text) + len(s_), "type": typ})
        text += s_
    for e in ents:  # verified: the offsets point at the entity string
        assert text[e["start"]:e["end"]] in [v[0] for v in fills.values()], (text, e)
    return text, ents


def make_ner() -> None:
    rng = random.Random(1007)
    sents = pool_unique(_ner_en_sentence, 400, rng, key=lambda x: " ".join(x[0]))
    train, dev = sents[:300], sents[300:]
    emit_text("ner/en/train.conll", _conll(train))
    emit_text("ner/en/dev.conll", _conll(dev))
    for name, ss in (("train", train), ("dev", dev)):
        c = Counter(t[2:] for _, tags in ss for t in tags if t.startswith("B-"))
        SUMMARY.append(f"ner/en/{name}.conll: {len(ss)} sentences, {sum(len(t) for t, _ in ss)} tokens; entities "
                       + ", ".join(f"{k}={c[k]}" for k in ("PER", "ORG", "LOC", "MISC")))
    rng = random.Random(1008)
    rows = pool_unique(_ner_zh_sentence, 400, rng, key=lambda x: x[0])
    train, dev = rows[:300], rows[300:]
    for name, rs in (("train", train), ("dev", dev)):
        for text, ents in rs:
            for e in ents:
                assert 0 <= e["start"] < e["end"] <= len(text)
        emit_jsonl(f"ner/zh/{name}.jsonl", [{"text": t, "entities": e} for t, e in rs])
        c = Counter(e["type"] for _, es in rs for e in es)
        SUMMARY.append(f"ner/zh/{name}.jsonl: {len(rs)} sentences; entities "
                       + ", ".join(f"{k}={c[k]}" for k in ("PER", "ORG", "LOC")) + " (offsets verified)")


# ============================================================================================
# 8. Extractive QA in SQuAD v2.0 format (data/qa/en, data/qa/zh)
# ============================================================================================


def render_tracked(tmpl: str, values: dict) -> tuple[str, dict]:
    """Format tmpl and return (text, {field: start offset of its value in text})."""
    out, pos = "", {}
    for part in re.split(r"(\{\w+\})", tmpl):
        m = re.fullmatch(r"\{(\w+)\}", part)
        if m:
            pos.setdefault(m.group(1), len(out))
            out += str(values[m.group(1)])
        else:
            out += part
    return out, pos


QA_EN_TYPES = {
    "town": {
        "names": ["Ashcombe", "Brindlemere", "Caldwick", "Dunharrow", "Elmsworth", "Fennick", "Glenmarrow",
                  "Hollinsby", "Kettleford", "Larkhaven", "Mossbury", "Northwold", "Oakhurst", "Pellingham",
                  "Quarrendon", "Ravensholt", "Thornwick", "Upperfold", "Wexley Cross", "Yarrowby", "Saltinge",
                  "Brackenholm", "Cinderford Vale", "Marlow Green"],
        "fields": {
            "region": ["northern uplands", "western lowlands", "south-west", "eastern fens", "central valley"],
            "river": ["River Alder", "River Swale", "River Tamsin", "River Brook", "River Colne", "River Idle"],
            "year": [str(y) for y in range(1190, 1890, 7)],
            "founder": ["a wool merchant named Edric Holt", "the monks of St Aldhelm", "a group of Flemish weavers",
                        "Lady Margaret Ferrers", "a ferryman called Tobias Wren"],
            "pop": ["4,200", "7,850", "12,300", "18,900", "23,400", "31,000", "2,650"],
            "known": ["blue-glazed pottery", "annual cheese fair", "medieval stone bridge", "lace-making tradition",
                      "oyster beds", "clock-making workshops", "cider orchards"],
            "mayor": ["Harriet Osei", "Colin Marsh", "Dev Patel", "Agnes Whitlock", "Samuel Brandt", "Ruth Ellery"],
            "myear": [str(y) for y in range(2014, 2025)],
            "building": ["the Corn Exchange", "St Mary's Church", "the Guildhall", "the old tannery", "the Toll House"],
        },
        "sents": [
            ("{name} is a market town in the {region}, on the banks of the {river}.", ["region", "river"]),
            ("It was founded in {year} by {founder}.", ["year", "founder"]),
            ("Today the town has a population of about {pop}.", ["pop"]),
            ("{name} is best known for its {known}, which attracts visitors from across the country.", ["known"]),
            ("The current mayor, {mayor}, was elected in {myear}.", ["mayor", "myear"]),
            ("The oldest surviving building in the town is {building}.", ["building"]),
        ],
        "questions": {
            "region": ["In which part of the country is {name}?", "Where is {name} located?"],
            "river": ["Which river does {name} stand on?", "On the banks of which river is {name}?"],
            "year": ["When was {name} founded?", "In what year was {name} founded?"],
            "founder": ["Who founded {name}?", "By whom was {name} founded?"],
            "pop": ["What is the population of {name}?", "How many people live in {name}?"],
            "known": ["What is {name} best known for?", "What attracts visitors to {name}?"],
            "mayor": ["Who is the mayor of {name}?", "Who currently serves as mayor of {name}?"],
            "myear": ["When was the current mayor of {name} elected?"],
            "building": ["What is the oldest surviving building in {name}?"],
        },
    },
    "company": {
        "names": ["Corvane Industries", "Halloway & Sons", "Brightstone Group", "Tamsin Works", "Ordell Holdings",
                  "Pennant & Co", "Silverbirch Industries", "Kestrel Manufacturing", "Marlowe Brothers",
                  "Greyfold Group", "Amberline Ltd", "Northcote & Partners", "Veyra Industries", "Lumen Works",
                  "Draycott Holdings", "Fairhaven Group", "Osprey Industries", "Tillman & Daughters"],
        "fields": {
            "founder": ["Isaac Marlowe", "Elena Vasquez", "Thomas Greaves", "Mei Lin Cho", "Arjun Mehta",
                        "Grace Okonkwo", "Henrik Dahl", "Lucia Ferro"],
            "year": [str(y) for y in range(1872, 2015, 5)],
            "city": ["Eastmere", "Port Calder", "Brenton", "Lowther", "Harlow Bay", "Greyhaven"],
            "product": ["precision thermometers", "recycled paper", "bicycle frames", "hearing aids",
                        "industrial sewing machines", "solar inverters", "stoneware tableware", "accounting software"],
            "staff": ["350", "1,200", "2,800", "4,500", "9,000", "14,000"],
            "ceo": ["Nadia Brandt", "Owen Quill", "Sofia Adeyemi", "Felix Moreau", "Leah Castell", "Isaac Draycott"],
            "revenue": ["£48 million", "£210 million", "£1.3 billion", "£760 million", "£95 million"],
            "acq": ["Pellham Ltd", "Wren & Sons", "Aldous Industries", "Brook Valley Holdings"],
            "acq_year": [str(y) for y in range(1990, 2024, 3)],
        },
        "sents": [
            ("{name} is a manufacturer of {product} based in {city}.", ["product", "city"]),
            ("The company was founded in {year} by {founder}.", ["year", "founder"]),
            ("It employs around {staff} people.", ["staff"]),
            ("Its chief executive is {ceo}.", ["ceo"]),
            ("Last year the company reported revenue of {revenue}.", ["revenue"]),
            ("In {acq_year} it bought its rival {acq}.", ["acq_year", "acq"]),
        ],
        "questions": {
            "product": ["What does {name} make?", "What products does {name} manufacture?"],
            "city": ["Where is {name} based?", "In which city is {name} headquartered?"],
            "year": ["When was {name} founded?", "In which year was {name} established?"],
            "founder": ["Who founded {name}?"],
            "staff": ["How many people does {name} employ?"],
            "ceo": ["Who is the chief executive of {name}?", "Who runs {name}?"],
            "revenue": ["What revenue did {name} report last year?"],
            "acq_year": ["When did {name} buy its rival?"],
            "acq": ["Which rival did {name} acquire?"],
        },
    },
    "scientist": {
        "names": ["Margarethe Olsen", "Tobias Renner", "Amina Diallo", "Hugo Lindqvist", "Catalina Ruiz",
                  "Emeka Nwosu", "Ingrid Solberg", "Rafael Duarte", "Yuki Tanabe", "Clara Whitcombe",
                  "Jonas Eberle", "Priya Raman", "Bertil Aalto", "Nora Kavanagh", "Matteo Galli",
                  "Halima Yusuf", "Ansel Forsythe", "Dagny Holm"],
        "fields": {
            "born": [str(y) for y in range(1850, 1975, 4)],
            "birthplace": ["Bergen", "Lyon", "Dakar", "Porto", "Kyoto", "Graz", "Cork", "Tartu", "Valparaíso"],
            "field": ["marine biology", "crystallography", "atmospheric chemistry", "plant genetics",
                      "astrophysics", "immunology", "glaciology", "materials science"],
            "discovery": ["a method for dating ice cores", "the first map of deep-sea hydrothermal vents",
                          "a drought-resistant strain of barley", "a new class of antifungal compounds",
                          "the role of cosmic dust in cloud formation", "a technique for growing synthetic sapphires"],
            "uni": ["the University of Eastmere", "Lowther University", "the Port Calder Institute of Technology",
                    "Greyhaven Medical School"],
            "award": ["the Halden Medal", "the Royal Society's Copley Medal", "the Meridian Prize",
                      "the Aldgate Award for Science"],
            "award_year": [str(y) for y in range(1920, 2024, 3)],
            "student": ["Paul Ferris", "Lena Hartmann", "Kofi Mensah", "Sara Lindgren"],
        },
        "sents": [
            ("{name} was a scientist who worked in {field}.", ["field"]),
            ("Born in {birthplace} in {born}, {name} studied at {uni}.", ["birthplace", "born", "uni"]),
            ("{name} is remembered above all for {discovery}.", ["discovery"]),
            ("The work earned {name} {award} in {award_year}.", ["award", "award_year"]),
            ("Among {name}'s doctoral students was {student}, who later continued the research.", ["student"]),
        ],
        "questions": {
            "field": ["In which field did {name} work?", "What was {name}'s area of research?"],
            "birthplace": ["Where was {name} born?"],
            "born": ["When was {name} born?", "In what year was {name} born?"],
            "uni": ["Where did {name} study?"],
            "discovery": ["What is {name} best remembered for?"],
            "award": ["Which award did {name} receive?"],
            "award_year": ["In which year did {name} receive the award?"],
            "student": ["Which doctoral student of {name} continued the research?"],
        },
    },
    "bridge": {
        "names": ["the Alder Viaduct", "the Swale Crossing", "the Harbour Arch", "the Kingsmead Bridge",
                  "the Tamsin Footbridge", "the Old Ferry Bridge", "the Calder Suspension Bridge", "the Millrace Bridge",
                  "the Lowther Aqueduct", "the Greyhaven Swing Bridge", "the Eastmere Causeway", "the Wrenfield Bridge",
                  "the Saltings Bridge", "the Pennock Viaduct"],
        "fields": {
            "architect": ["Jonathan Sallis", "Marta Kovač", "Edwin Thorne", "Aiko Mori", "Gerald Pike", "Hélène Vautrin"],
            "year": [str(y) for y in range(1790, 2015, 6)],
            "length": ["120 metres", "340 metres", "610 metres", "85 metres", "1.2 kilometres", "450 metres"],
            "material": ["red sandstone", "cast iron", "reinforced concrete", "weathering steel", "granite", "timber"],
            "cost": ["£14,000", "£2.1 million", "£38 million", "£610,000", "£95 million"],
            "traffic": ["about 12,000 vehicles a day", "only pedestrians and cyclists", "two railway lines",
                        "around 40,000 vehicles a day"],
            "river": ["the River Alder", "the River Swale", "the River Colne", "the River Tamsin", "the estuary"],
        },
        "sents": [
            ("{name} spans {river} and carries {traffic}.", ["river", "traffic"]),
            ("It was designed by {architect} and completed in {year}.", ["architect", "year"]),
            ("The structure is {length} long and is built mainly of {material}.", ["length", "material"]),
            ("Construction cost {cost}, a large sum at the time.", ["cost"]),
        ],
        "questions": {
            "river": ["What does {name} cross?"],
            "traffic": ["What does {name} carry?"],
            "architect": ["Who designed {name}?", "Which architect was responsible for {name}?"],
            "year": ["When was {name} completed?", "In what year was {name} finished?"],
            "length": ["How long is {name}?"],
            "material": ["What is {name} mainly built of?"],
            "cost": ["How much did {name} cost to build?"],
        },
    },
    "species": {
        "names": ["the Ashby shrew", "the Penrose beetle", "the Calder vole", "the Marrick thrush", "the Holloway frog",
                  "the Tamsin skipper", "the Greaves moth", "the Wendle lizard", "the Corran snail", "the Pike bat",
                  "the Aldous wren", "the Fenwick spider", "the Oakley weevil", "the Sallow mouse"],
        "fields": {
            "habitat": ["coastal salt marshes", "limestone cliffs", "overgrown riverbanks", "ancient oak woodland",
                        "high moorland", "sand dunes", "old hay meadows"],
            "diet": ["small insects", "seeds and berries", "spiders", "snails and worms", "nectar", "decaying leaves"],
            "size": ["4 centimetres", "11 centimetres", "18 millimetres", "26 centimetres", "7 centimetres"],
            "lifespan": ["about two years", "up to six years", "a single summer", "around twelve years"],
            "discoverer": ["the naturalist Alice Penrose", "a schoolteacher named Walter Greaves",
                           "the explorer Ivo Marchetti", "a team from the Kestrel Point Marine Laboratory"],
            "year": [str(y) for y in range(1820, 2010, 7)],
            "threat": ["drainage of wetlands", "coastal development", "pesticide use", "loss of hedgerows", "invasive rats"],
        },
        "sents": [
            ("{name} lives mainly in {habitat}.", ["habitat"]),
            ("It feeds on {diet} and grows to about {size}.", ["diet", "size"]),
            ("Individuals live for {lifespan}.", ["lifespan"]),
            ("It was first described in {year} by {discoverer}.", ["year", "discoverer"]),
            ("The main threat to the species today is {threat}.", ["threat"]),
        ],
        "questions": {
            "habitat": ["Where does {name} live?", "What is the habitat of {name}?"],
            "diet": ["What does {name} eat?"],
            "size": ["How big does {name} grow?"],
            "lifespan": ["How long does {name} live?"],
            "year": ["When was {name} first described?"],
            "discoverer": ["Who first described {name}?"],
            "threat": ["What is the main threat to {name}?"],
        },
    },
}
QA_EN_FILLER = {
    "town": LD_FILLER,
    "company": [
        "The company's early years were difficult, and on more than one occasion it came close to closing.",
        "Much of the original workshop still stands and is now used as a training centre.",
        "Staff describe the culture as informal, with an emphasis on practical problem-solving.",
        "The firm has a long tradition of taking on apprentices from local schools.",
        "Its products are sold in more than thirty countries through a network of distributors.",
        "A small museum at the head office displays early prototypes and the original order books.",
        "During the war the factory was turned over to making parts for the armed forces.",
        "The company publishes an annual report on its environmental performance.",
        "Industry analysts regard it as one of the better-managed firms in its sector.",
        "The business remained in family hands for several generations before it was listed on the stock exchange.",
        "Its logo, a stylised bird, was designed by a student in a competition.",
        "Relations with the trade unions have generally been good, although there was a long strike in the 1970s.",
    ],
    "scientist": [
        "Colleagues described a tireless worker who often stayed in the laboratory late into the night.",
        "The early experiments were carried out with equipment built by hand from spare parts.",
        "Funding was a constant worry, and several projects were abandoned for lack of money.",
        "The results were at first met with scepticism by other researchers in the field.",
        "Later studies confirmed the main conclusions, although some details were revised.",
        "Outside the laboratory, the scientist was a keen mountaineer and an amateur violinist.",
        "Lectures given to the public drew large audiences and were later published as a book.",
        "Many of the original notebooks are now kept in the university archive.",
        "The research depended on long field seasons in remote places, often in difficult weather.",
        "Several of the techniques developed for the work are still taught to students today.",
        "Letters to friends show a dry sense of humour and a deep curiosity about the natural world.",
        "A building on the university campus was later named in the scientist's honour.",
    ],
    "bridge": [
        "Before it was built, travellers had to rely on a ferry that could not run in bad weather.",
        "The design was chosen after a public competition that attracted dozens of entries.",
        "Several workers were injured during construction, and safety rules were tightened as a result.",
        "The opening ceremony was attended by thousands of people and marked by a brass band.",
        "The structure was strengthened in the late twentieth century to cope with heavier loads.",
        "At night the arches are lit, and the bridge has become a popular subject for photographers.",
        "Engineers inspect the structure every year and publish a report on its condition.",
        "A small exhibition in the nearby visitor centre explains how the bridge was built.",
        "The river below is tidal, and at low water the foundations of an older crossing can still be seen.",
        "Local people were initially opposed to the plans, fearing that the bridge would spoil the view.",
        "It has appeared in several films and on at least one postage stamp.",
        "Maintenance work is usually carried out at night to reduce disruption.",
    ],
    "species": [
        "Like many small animals, it is most active at dawn and dusk.",
        "Surveys carried out by volunteers have helped scientists to map its range.",
        "It is protected by law, and disturbing its breeding sites is an offence.",
        "The young are born in late spring and are independent within a few weeks.",
        "Its colouring provides good camouflage against the background of its habitat.",
        "Numbers fluctuate from year to year depending on the weather.",
        "Conservation groups have created new areas of suitable habitat in recent years.",
        "It is rarely seen by casual visitors, as it is shy and well hidden.",
        "Researchers have fitted a small number of individuals with tiny tracking tags.",
        "Local folklore associates the animal with good luck at harvest time.",
        "Predators include birds of prey, foxes and, in some places, domestic cats.",
        "Its call is a quiet, repeated clicking that can be heard on still evenings.",
    ],
}


def _qa_en_paragraph(rng: random.Random, typ: str, name: str, other_names: list[str], long_ctx: bool, pid: str):
    spec = QA_EN_TYPES[typ]
    vals = {f: pick(rng, pool) for f, pool in spec["fields"].items()}
    vals["name"] = name
    # Keep dates consistent with each other.
    if typ == "scientist":
        vals["award_year"] = str(min(2023, int(vals["born"]) + rng.randint(32, 60)))
        vals["discovery"] = {
            "marine biology": "the first map of deep-sea hydrothermal vents",
            "crystallography": "a technique for growing synthetic sapphires",
            "atmospheric chemistry": "the role of cosmic dust in cloud formation",
            "plant genetics": "a drought-resistant strain of barley",
            "astrophysics": "a catalogue of more than two thousand variable stars",
            "immunology": "a new class of antifungal compounds",
            "glaciology": "a method for dating ice cores",
            "materials science": "a heat-resistant ceramic coating for turbine blades",
        }[vals["field"]]
    if typ == "company" and int(vals["acq_year"]) <= int(vals["year"]):
        vals["acq_year"] = str(min(2023, int(vals["year"]) + rng.randint(5, 20)))
    sents = spec["sents"]
    keep = [sents[0]] + [s_ for s_ in sents[1:] if rng.random() < 0.8]
    omitted = [f for s_ in sents if s_ not in keep for f in s_[1]]
    pieces = []  # (sentence text, {field: start within sentence})
    for tmpl, _ in keep:
        text, pos = render_tracked(tmpl, vals)
        pieces.append((cap(text), pos))
    if long_ctx:  # pad with topic-neutral sentences between the facts so the context exceeds 400 words
        bank = list(QA_EN_FILLER[typ])
        rng.shuffle(bank)
        filler = []
        goal = rng.randint(420, 640)
        while bank and sum(words(p[0]) for p in pieces) + sum(words(f) for f in filler) < goal:
            t = bank.pop()
            filler.append(_ld_fill(rng, t) if typ == "town" else t)
        for f in filler:
            pieces.insert(rng.randint(1, len(pieces)), (f, {}))
    context, answers = "", {}
    for text, pos in pieces:
        if context:
            context += " "
        for f, p in pos.items():
            if f != "name":
                answers[f] = (len(context) + p, str(vals[f]))
        context += text
    display = cap(name) if name.startswith("the ") else name
    qas = []
    fields = [f for f in answers if f in spec["questions"]]
    rng.shuffle(fields)
    for f in fields[: rng.randint(2, 5)]:
        start, text = answers[f]
        q = pick(rng, spec["questions"][f]).format(name=name)
        qas.append({"question": cap(q), "answers": [{"text": text, "answer_start": start}], "is_impossible": False})
    n_imp = 1 if rng.random() < 0.85 else 2
    for _ in range(n_imp):
        if omitted and rng.random() < 0.6:
            f = pick(rng, [f for f in omitted if f in spec["questions"]])
            q = pick(rng, spec["questions"][f]).format(name=name)
        else:  # ask about a different entity of the same kind, which the paragraph never mentions
            f = pick(rng, fields)
            q = pick(rng, spec["questions"][f]).format(name=pick(rng, other_names))
        if all(q != x["question"] for x in qas):
            qas.append({"question": cap(q), "answers": [], "is_impossible": True})
    for i, qa in enumerate(qas):
        qa["id"] = f"{pid}-q{i}"
    qas = [{"id": qa["id"], "question": qa["question"], "answers": qa["answers"], "is_impossible": qa["is_impossible"]}
           for qa in qas]
    return {"title": display, "paragraphs": [{"context": context, "qas": qas}]}


def verify_squad(doc: dict, rel: str) -> tuple[int, int, int]:
    n_par = n_q = n_imp = 0
    for art in doc["data"]:
        for par in art["paragraphs"]:
            n_par += 1
            ctx = par["context"]
            for qa in par["qas"]:
                n_q += 1
                if qa["is_impossible"]:
                    n_imp += 1
                    assert qa["answers"] == [], (rel, qa)
                for a in qa["answers"]:
                    s_ = a["answer_start"]
                    assert ctx[s_:s_ + len(a["text"])] == a["text"], (rel, qa, ctx[s_:s_ + len(a["text"])])
    return n_par, n_q, n_imp


def _qa_split_names(rng: random.Random, types: dict, n_train: int, n_dev: int):
    """Entity names are disjoint between train and dev. Returns [(type, name, other names)] per split."""
    per_type_train, per_type_dev = {}, {}
    for t, spec in types.items():
        names = list(spec["names"])
        rng.shuffle(names)
        k = max(2, len(names) // 4)
        per_type_dev[t], per_type_train[t] = names[:k], names[k:]
    out = []
    for per, n in ((per_type_train, n_train), (per_type_dev, n_dev)):
        items = [(t, nm) for t in per for nm in per[t]]
        rng.shuffle(items)
        assert len(items) >= n, (len(items), n)
        out.append([(t, nm, [x for x in per[t] if x != nm]) for t, nm in items[:n]])
    return out


def make_qa_en() -> None:
    rng = random.Random(1009)
    tr_items, dev_items = _qa_split_names(rng, QA_EN_TYPES, 60, 20)
    for split, items in (("train", tr_items), ("dev", dev_items)):
        data = []
        for i, (t, nm, others) in enumerate(items):
            # Long (400+ word) contexts: towns, padded with local-colour sentences between the facts.
            long_ctx = t == "town" and rng.random() < 0.85
            data.append(_qa_en_paragraph(rng, t, nm, others, long_ctx=long_ctx, pid=f"en-{split}-{i:03d}"))
        doc = {"version": "v2.0", "data": data}
        n_par, n_q, n_imp = verify_squad(doc, f"qa/en/{split}.json")
        emit_json(f"qa/en/{split}.json", doc)
        long_n = sum(1 for a in data for p in a["paragraphs"] if words(p["context"]) >= 400)
        SUMMARY.append(f"qa/en/{split}.json: {n_par} paragraphs ({long_n} with 400+ words), {n_q} questions, "
                       f"{n_imp} unanswerable ({100 * n_imp / n_q:.0f}%); answer offsets verified")


QA_ZH_TYPES = {
    "town": {
        "names": ["青溪镇", "柳塘镇", "云石镇", "白沙镇", "枫林镇", "石门镇", "桃源镇", "临江镇", "望海镇", "南屏镇",
                  "松林镇", "古渡镇", "杏花镇", "月湖镇", "金溪镇", "东坪镇", "北岭镇", "西湾镇", "凤鸣镇", "清平镇"],
        "fields": {
            "prov": ["浙江省", "江西省", "福建省", "湖南省", "四川省", "安徽省"],
            "river": ["清江", "兰溪", "沅水", "富春江", "赣江", "新安江"],
            "dyn": ["北宋", "南宋", "元代", "明代", "清代"],
            "year": [str(y) for y in range(1020, 1880, 13)],
            "pop": ["三万二千", "一万八千", "五万六千", "九千", "四万三千", "两万七千"],
            "known": ["竹编工艺", "黄酒酿造", "青瓷烧制", "古法造纸", "龙舟竞渡", "茶叶种植"],
            "sight": ["永宁桥", "文昌阁", "古戏台", "观音寺", "林家大院", "状元坊"],
            "food": ["桂花糕", "霉干菜饼", "米粉", "豆腐包", "酱鸭", "菱角糕"],
        },
        "sents": [
            ("{name}位于{prov}，地处{river}下游。", ["prov", "river"]),
            ("{name}始建于{dyn}，距今已有数百年历史。", ["dyn"]),
            ("全镇现有常住人口约{pop}人。", ["pop"]),
            ("{name}以{known}闻名，每年吸引大批游客前来参观。", ["known"]),
            ("镇上最古老的建筑是{sight}，建于{year}年。", ["sight", "year"]),
            ("当地最有名的小吃是{food}。", ["food"]),
        ],
        "questions": {
            "prov": ["{name}位于哪个省？", "{name}在哪个省份？"],
            "river": ["{name}地处哪条河流的下游？"],
            "dyn": ["{name}始建于哪个朝代？"],
            "pop": ["{name}有多少常住人口？"],
            "known": ["{name}以什么闻名？"],
            "sight": ["{name}最古老的建筑是什么？"],
            "year": ["{name}最古老的建筑建于哪一年？"],
            "food": ["{name}最有名的小吃是什么？"],
        },
    },
    "company": {
        "names": ["华睿集团", "远帆实业", "恒达控股", "青松工业", "明辉集团", "瑞丰实业", "鼎盛控股", "嘉禾集团",
                  "天越实业", "博远控股", "泰和集团", "长青实业", "新源集团", "安澜控股"],
        "fields": {
            "year": [str(y) for y in range(1985, 2020, 2)],
            "founder": ["陈志远", "林晓梅", "王海涛", "周文斌", "李静怡", "赵国平"],
            "city": ["杭州", "苏州", "宁波", "合肥", "成都", "东莞", "青岛"],
            "product": ["家用电器", "新能源电池", "医疗器械", "纺织面料", "工业机器人", "智能门锁"],
            "staff": ["八百", "三千二百", "一万二千", "五千", "两千六百"],
            "revenue": ["四十亿元", "十二亿元", "八十五亿元", "三亿六千万元", "二百亿元"],
            "ceo": ["孙浩然", "郑雅琴", "何建明", "许嘉欣", "梁志刚"],
        },
        "sents": [
            ("{name}成立于{year}年，总部位于{city}。", ["year", "city"]),
            ("公司由{founder}创办，主要生产{product}。", ["founder", "product"]),
            ("目前公司员工约{staff}人。", ["staff"]),
            ("去年公司实现营业收入{revenue}。", ["revenue"]),
            ("现任总经理为{ceo}。", ["ceo"]),
        ],
        "questions": {
            "year": ["{name}成立于哪一年？"], "city": ["{name}的总部在哪里？", "{name}总部位于哪座城市？"],
            "founder": ["{name}是由谁创办的？"], "product": ["{name}主要生产什么？"],
            "staff": ["{name}有多少员工？"], "revenue": ["{name}去年的营业收入是多少？"],
            "ceo": ["{name}的现任总经理是谁？"],
        },
    },
    "person": {
        "names": ["沈若兰", "顾明哲", "苏静远", "韩立诚", "叶知秋", "罗文澜", "程思远", "方慕白", "宋清和", "唐怀瑾",
                  "陆以宁", "卫成章"],
        "fields": {
            "born": [str(y) for y in range(1890, 1975, 3)],
            "place": ["绍兴", "长沙", "泉州", "扬州", "桂林", "大理", "开封"],
            "field": ["地质学", "植物学", "气象学", "材料科学", "海洋生物学", "农学"],
            "uni": ["北平大学", "东南大学", "中山大学", "武汉大学", "浙江大学"],
            "work": ["培育出一种抗旱水稻新品种", "绘制了华南地区第一份详细的地质图", "研制出一种新型耐高温陶瓷材料",
                     "提出了台风路径的预测方法", "发明了珊瑚礁的人工培育技术"],
            "award": ["国家自然科学奖", "青年科学家奖", "科学技术进步奖"],
            "award_year": [str(y) for y in range(1950, 2024, 3)],
        },
        "sents": [
            ("{name}是一位从事{field}研究的科学家。", ["field"]),
            ("{name}于{born}年出生在{place}，早年就读于{uni}。", ["born", "place", "uni"]),
            ("{name}最重要的成果是{work}。", ["work"]),
            ("{award_year}年，{name}获得{award}。", ["award_year", "award"]),
        ],
        "questions": {
            "field": ["{name}从事哪个领域的研究？"], "born": ["{name}出生于哪一年？"],
            "place": ["{name}出生在哪里？"], "uni": ["{name}早年就读于哪所大学？"],
            "work": ["{name}最重要的成果是什么？"], "award": ["{name}获得了什么奖项？"],
            "award_year": ["{name}在哪一年获奖？"],
        },
    },
    "bridge": {
        "names": ["安澜桥", "长虹大桥", "迎春桥", "望江大桥", "永济桥", "万福桥", "通和桥", "龙溪桥", "太和桥", "永和大桥",
                  "双溪桥", "会仙桥"],
        "fields": {
            "river": ["闽江", "湘江", "钱塘江", "汉江", "嘉陵江", "瓯江"],
            "year": [str(y) for y in range(1150, 2020, 17)],
            "length": ["二百八十米", "一千二百米", "六百五十米", "九十米", "两千一百米"],
            "material": ["花岗岩", "钢筋混凝土", "木材", "钢材", "青石"],
            "designer": ["李春华", "王德明", "高永年", "冯怀远", "许志成"],
            "cost": ["一亿二千万元", "四千万元", "八亿元", "三亿五千万元"],
            "old_cost": ["三千两白银", "一万二千两白银", "八百两白银"],
        },
        "sents": [
            ("{name}横跨{river}，是当地重要的交通要道。", ["river"]),
            ("大桥由{designer}主持设计，于{year}年建成。", ["designer", "year"]),
            ("桥梁全长{length}，主体采用{material}建造。", ["length", "material"]),
            ("建造这座桥共花费{cost}。", ["cost"]),
        ],
        "questions": {
            "river": ["{name}横跨哪条江？"], "designer": ["{name}是由谁主持设计的？"], "year": ["{name}建成于哪一年？"],
            "length": ["{name}全长多少？"], "material": ["{name}主体采用什么材料建造？"], "cost": ["建造{name}花费了多少？"],
        },
    },
}
QA_ZH_FILLER = [
    "清晨的薄雾还没有散去，河边已经有人在洗衣服了。", "老街两旁的店铺大多是木结构的老房子，门板一块一块地卸下来。",
    "每逢农历初一和十五，镇上都会有热闹的集市。", "茶馆里坐满了上了年纪的老人，有的下棋，有的听评书。",
    "小巷深处传来阵阵桂花的香气。", "傍晚时分，炊烟袅袅升起，整个小镇显得格外安静。",
    "石板路被雨水冲刷得发亮，走在上面要格外小心。", "镇口的大榕树下，孩子们在追逐打闹。",
    "这些年，不少年轻人外出打工，镇上的老人和孩子比以前多了。", "春天的时候，田野里开满了油菜花，一眼望不到边。",
    "镇上的小学去年翻修了教学楼，还新建了一个操场。", "沿河的步道是前几年修建的，晚饭后常有人在这里散步。",
    "夏天的夜晚，河面上吹来阵阵凉风，人们喜欢搬出竹椅在门口乘凉。", "镇上的邮局已经有几十年的历史了，门口的绿色邮筒还在使用。",
    "一位在这里住了一辈子的老人说，小镇的变化主要是在最近十年。", "每到周末，都会有城里人开车过来游玩。",
    "老街上有一家开了三代的剃头铺，至今还保留着老式的理发椅。", "冬天这里很少下雪，但河边的风吹在脸上还是很冷。",
    "镇政府门前的小广场上，每天晚上都有人跳广场舞。", "从县城坐公交车到这里大约需要四十分钟。",
    "河上的渡船如今已经很少有人乘坐，只是偶尔载一些游客。", "不少人家的院子里种着柿子树，秋天挂满了红红的果子。",
    "镇上的图书馆不大，但每天都有学生在这里写作业。", "逢年过节，舞龙舞狮的队伍会从老街一直走到河边。",
    "早点铺的蒸笼冒着热气，门口排起了长队。", "一场大雨过后，远处的山显得更加青翠。",
]


def _qa_zh_paragraph(rng: random.Random, typ: str, name: str, other_names: list[str], long_ctx: bool, pid: str):
    spec = QA_ZH_TYPES[typ]
    vals = {f: pick(rng, pool) for f, pool in spec["fields"].items()}
    vals["name"] = name
    if typ == "person":
        vals["award_year"] = str(min(2023, int(vals["born"]) + rng.randint(35, 60)))
        vals["work"] = {
            "地质学": "绘制了华南地区第一份详细的地质图", "植物学": "发现了三十多种新的蕨类植物",
            "气象学": "提出了台风路径的预测方法", "材料科学": "研制出一种新型耐高温陶瓷材料",
            "海洋生物学": "发明了珊瑚礁的人工培育技术", "农学": "培育出一种抗旱水稻新品种",
        }[vals["field"]]
    if typ == "bridge":
        if int(vals["year"]) < 1900:
            vals["cost"] = vals["old_cost"]
            vals["material"] = pick(rng, ["花岗岩", "木材", "青石"])
        vals["length"] = pick(rng, ["二百八十米", "九十米", "一百六十米"]) if int(vals["year"]) < 1900 else vals["length"]
    sents = spec["sents"]
    keep = [sents[0]] + [s_ for s_ in sents[1:] if rng.random() < 0.8]
    omitted = [f for s_ in sents if s_ not in keep for f in s_[1]]
    pieces = [render_tracked(t, vals) for t, _ in keep]
    if long_ctx:
        bank = list(QA_ZH_FILLER)
        rng.shuffle(bank)
        goal = rng.randint(560, 800)
        filler = []
        while bank and sum(len(p[0]) for p in pieces) + sum(len(f) for f in filler) < goal:
            filler.append(bank.pop())
        for f in filler:
            pieces.insert(rng.randint(1, len(pieces)), (f, {}))
    context, answers = "", {}
    for text, pos in pieces:
        for f, p in pos.items():
            if f != "name":
                answers[f] = (len(context) + p, str(vals[f]))
        context += text
    qas = []
    fields = [f for f in answers if f in spec["questions"]]
    rng.shuffle(fields)
    for f in fields[: rng.randint(2, 5)]:
        start, text = answers[f]
        qas.append({"question": pick(rng, spec["questions"][f]).format(name=name),
                    "answers": [{"text": text, "answer_start": start}], "is_impossible": False})
    for _ in range(1 if rng.random() < 0.95 else 2):
        if omitted and rng.random() < 0.6:
            f = pick(rng, omitted)
            q = pick(rng, spec["questions"][f]).format(name=name)
        else:
            q = pick(rng, spec["questions"][pick(rng, fields)]).format(name=pick(rng, other_names))
        if all(q != x["question"] for x in qas):
            qas.append({"question": q, "answers": [], "is_impossible": True})
    qas = [{"id": f"{pid}-q{i}", "question": qa["question"], "answers": qa["answers"],
            "is_impossible": qa["is_impossible"]} for i, qa in enumerate(qas)]
    return {"title": name, "paragraphs": [{"context": context, "qas": qas}]}


def make_qa_zh() -> None:
    rng = random.Random(1012)
    tr_items, dev_items = _qa_split_names(rng, QA_ZH_TYPES, 40, 14)
    for split, items in (("train", tr_items), ("dev", dev_items)):
        data = []
        for i, (t, nm, others) in enumerate(items):
            long_ctx = t == "town" and rng.random() < 0.85
            data.append(_qa_zh_paragraph(rng, t, nm, others, long_ctx=long_ctx, pid=f"zh-{split}-{i:03d}"))
        doc = {"version": "v2.0", "data": data}
        n_par, n_q, n_imp = verify_squad(doc, f"qa/zh/{split}.json")
        emit_json(f"qa/zh/{split}.json", doc)
        long_n = sum(1 for a in data for p in a["paragraphs"] if len(p["context"]) >= 512)
        SUMMARY.append(f"qa/zh/{split}.json: {n_par} paragraphs ({long_n} with 512+ characters), {n_q} questions, "
                       f"{n_imp} unanswerable ({100 * n_imp / n_q:.0f}%); answer offsets verified")


# ============================================================================================
# 9. Multiple choice reading comprehension (data/choice/en, data/choice/zh)
# ============================================================================================

CH_NAMES = ["Mia", "Tom", "Aisha", "Leo", "Hana", "Sam", "Nina", "Omar", "Eva", "Raj", "Lucy", "Ben", "Zoe", "Ivan"]
CH_FEMALE = ("Mia", "Aisha", "Hana", "Nina", "Eva", "Lucy", "Zoe")
CH_ITEMS = ["a loaf of bread", "a dozen eggs", "some tomatoes", "a bag of rice", "a bunch of flowers",
            "a jar of honey", "some apples", "a box of tea", "a bottle of olive oil", "a newspaper", "some cheese",
            "a birthday card"]
CH_PLACES = ["market", "supermarket", "corner shop", "farm shop"]
CH_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
CH_EVENTS = ["a picnic by the lake", "a concert in the park", "a birthday party", "a football match",
             "a dinner at her house", "a film at the cinema"]
CH_REASONS = [
    ("the bus broke down halfway", "The bus broke down."),
    ("the alarm clock did not ring", "The alarm clock did not ring."),
    ("the road was blocked by a fallen tree", "A tree blocked the road."),
    ("the train was cancelled because of snow", "The train was cancelled."),
    ("a neighbour needed help carrying boxes", "A neighbour needed help."),
    ("the car would not start in the cold", "The car would not start."),
]
CH_TRANSPORT = [("walk", "On foot."), ("take the bus", "By bus."), ("take a taxi", "By taxi."), ("cycle", "By bike."),
                ("drive", "By car.")]


def _choice_en(rng: random.Random):
    kind = rng.randrange(6)
    name, friend = rng.sample(CH_NAMES, 2)
    he, him, his = ("she", "her", "her") if name in CH_FEMALE else ("he", "him", "his")
    if kind == 0:
        items = rng.sample(CH_ITEMS, 5)
        place, day, event = pick(rng, CH_PLACES), pick(rng, CH_DAYS), pick(rng, CH_EVENTS)
        ctx = (f"{name} went to the {place} on {day} morning. {cap(he)} bought {items[0]} and {items[1]}, but the shop "
               f"had run out of {items[2]}. On the way home, {he} met {friend}, who invited {him} to {event} the "
               f"following weekend.")
        q = rng.randrange(4)
        if q == 0:
            return ctx, f"What did {name} buy?", f"{cap(items[0])} and {items[1]}.", [
                f"{cap(items[0])} and {items[2]}.", f"{cap(items[2])} and {items[3]}.", f"{cap(items[1])} and {items[4]}."]
        if q == 1:
            return ctx, "What had the shop run out of?", cap(items[2]) + ".", [cap(items[0]) + ".", cap(items[1]) + ".",
                                                                          cap(items[3]) + "."]
        if q == 2:
            others = [n for n in CH_NAMES if n not in (name, friend)]
            return ctx, f"Who did {name} meet on the way home?", friend + ".", [x + "." for x in rng.sample(others, 3)]
        return ctx, f"What was {name} invited to?", cap(event) + ".", [
            cap(e) + "." for e in rng.sample([e for e in CH_EVENTS if e != event], 3)]
    if kind == 1:
        (r_long, r_short), *others = rng.sample(CH_REASONS, 4)
        mins = rng.choice([10, 15, 20, 25, 30, 40])
        ctx = (f"{name} is usually the first to arrive at the office. On {pick(rng, CH_DAYS)}, however, {he} came in "
               f"{mins} minutes late because {r_long}. The manager, {friend}, just smiled and said it happens to everyone.")
        if rng.random() < 0.7:
            return ctx, f"Why was {name} late?", r_short, [o[1] for o in others]
        wrong = rng.sample([m for m in (5, 10, 15, 20, 25, 30, 40, 45, 60) if m != mins], 3)
        return ctx, f"How late was {name}?", f"{mins} minutes.", [f"{w} minutes." for w in wrong]
    if kind == 2:
        (t1, _), (t2, ans) = rng.sample(CH_TRANSPORT, 2)
        dest = pick(rng, ["the museum", "the station", "the library", "the cinema", "the beach", "the hospital"])
        why = {"walk": "It is only ten minutes away and the weather is lovely.",
               "take the bus": "The bus stops right outside, and it is raining.",
               "take a taxi": "We are late already, and a taxi will be quicker.",
               "cycle": "It is a nice day and there is a cycle path all the way.",
               "drive": "We have a lot to carry, so the car is easier."}[t2]
        ctx = f"Man: Shall we {t1} to {dest}?\nWoman: I'd rather we {t2}. {why}\nMan: All right, you're probably right."
        wrong = [a for t, a in CH_TRANSPORT if t != t2]
        return ctx, f"How will they probably get to {dest}?", ans, rng.sample(wrong, 3)
    if kind == 3:
        h = rng.randint(6, 9)
        m = pick(rng, [0, 15, 30, 45])
        early = pick(rng, [10, 15, 20, 25])
        show = pick(rng, ["film", "play", "concert", "lecture"])
        start = h * 60 + m
        arrive = start - early

        def fmt(x):
            return f"{x // 60}:{x % 60:02d}"
        ctx = (f"The {show} started at {fmt(start)} in the evening. {name} arrived {early} minutes early and waited "
               f"outside for {friend}, who was ten minutes late.")
        qk = rng.random()
        if qk < 0.5:
            return ctx, f"What time did {name} arrive?", fmt(arrive) + ".", [fmt(start + early) + ".", fmt(start) + ".",
                                                                          fmt(arrive - 10) + "."]
        return ctx, f"What time did {friend} arrive?", fmt(start + 10) + ".", [fmt(start) + ".", fmt(arrive) + ".",
                                                                            fmt(start - 10) + "."]
    if kind == 4:
        price = rng.randint(2, 5)
        qty = rng.randint(2, 4)
        note = 20 if price * qty > 10 else 10
        fruit = pick(rng, ["apples", "pears", "plums", "oranges", "cherries"])
        ctx = (f"At the market, {fruit} cost {price} dollars a kilo. {name} bought {qty} kilos and paid with a "
               f"{note}-dollar note.")
        change = note - price * qty
        wrong = sorted({change + 1, change + price, price * qty, max(0, change - 1)} - {change})[:3]
        while len(wrong) < 3:
            wrong.append(change + 2 + len(wrong))
        return ctx, f"How much change did {name} get?", f"{change} dollars.", [f"{w} dollars." for w in wrong]
    # kind 5: feelings / inference from a short note
    mood = rng.randrange(3)
    ctx, ans = [
        (f"{name} had practised the piano every evening for months. When the results of the exam arrived, {he} "
         f"read the letter twice, then ran downstairs shouting to tell {friend}.", "Excited and happy."),
        (f"{name} waited at the station for two hours, but {friend} never came and did not answer the phone. "
         f"In the end {he} went home alone and did not speak to anyone for the rest of the evening.", "Upset and disappointed."),
        (f"{name} had never spoken in front of a large audience. Before the talk, {his} hands were shaking and "
         f"{he} kept checking {his} notes again and again.", "Nervous."),
    ][mood]
    wrong = [x for x in ["Excited and happy.", "Upset and disappointed.", "Nervous.", "Bored.", "Angry with the teacher."]
             if x != ans]
    return ctx, f"How did {name} most probably feel?", ans, rng.sample(wrong, 3)


ZH_CH_NAMES = ["小王", "小李", "小张", "小刘", "小陈", "小林", "小赵", "小周"]


def _choice_zh(rng: random.Random):
    kind = rng.randrange(6)
    a, b = rng.sample(ZH_CH_NAMES, 2)
    if kind == 0:
        opts = [("坐地铁", "坐地铁去"), ("打车", "打车去"), ("骑自行车", "骑自行车去"), ("走路", "走路去"), ("坐公交车", "坐公交车去")]
        (m1, _), (m2, ans) = rng.sample(opts, 2)
        why = {"坐地铁": "现在路上堵车，地铁最快。", "打车": "东西太多了，拿着不方便。", "骑自行车": "天气这么好，正好锻炼锻炼。",
               "走路": "不远，十分钟就到了。", "坐公交车": "公交车就在楼下，很方便。"}[m2]
        place = pick(rng, ["火车站", "图书馆", "医院", "电影院", "超市"])
        ctx = f"男：我们{m1}去{place}吧？\n女：还是{m2}吧，{why}\n男：好，听你的。"
        return ctx, f"他们最可能怎么去{place}？", ans, rng.sample([o[1] for o in opts if o[0] != m2], 3)
    if kind == 1:
        reasons = [("路上堵车了", "路上堵车"), ("闹钟没响", "闹钟没响"), ("公交车坏在半路上了", "公交车坏了"),
                   ("帮邻居搬了一会儿东西", "帮邻居搬东西"), ("出门时忘了带钥匙，又回去拿", "回去拿钥匙")]
        (r_long, r_short), *others = rng.sample(reasons, 4)
        ctx = f"女：{a}，今天怎么迟到了？\n男：别提了，{r_long}。\n女：下次早点出门吧。"
        return ctx, "男的为什么迟到了？", r_short, [o[1] for o in others]
    if kind == 2:
        places = [(["您要的菜马上就好，请再稍等一下。", "今天的特价菜是红烧鱼，要不要来一份？", "先给您上一壶茶。"], "饭馆"),
                  (["请出示一下您的借书证。", "这本书要两周之内还回来。", "这里请保持安静。"], "图书馆"),
                  (["这件衬衫还有大一号的吗？", "这双鞋可以试穿一下吗？", "现在全场打八折。"], "商店"),
                  (["请把行李放到安检机上。", "您的航班延误了半个小时。", "请到三号登机口登机。"], "机场"),
                  (["请问您哪里不舒服？", "先去挂号，再到二楼量体温。", "这个药一天吃三次。"], "医院"),
                  (["下一站就是终点站了，请带好随身物品。", "请给老人让个座。", "上车请刷卡。"], "公交车上"),
                  (["请问您要寄到哪里？", "这个包裹大概三天能到。"], "邮局"),
                  (["我想把这笔钱存到卡里。", "请在这里输入密码。"], "银行")]
        (lines, ans), *others = rng.sample(places, 4)
        ctx = f"{pick(rng, ['男', '女'])}：{pick(rng, lines)}"
        return ctx, "这句话最可能是在哪里说的？", ans, [o[1] for o in others]
    if kind == 3:
        price = rng.randint(3, 9)
        qty = rng.randint(2, 4)
        pay = 50 if price * qty > 20 else 20
        fruit = pick(rng, ["苹果", "香蕉", "橘子", "葡萄", "西瓜"])
        change = pay - price * qty
        ctx = f"{fruit}{price}块钱一斤，{a}买了{qty}斤，给了老板{pay}块钱。"
        wrong = sorted({change + 1, change + price, price * qty, max(0, change - 2)} - {change})[:3]
        while len(wrong) < 3:
            wrong.append(change + 3 + len(wrong))
        return ctx, f"老板应该找给{a}多少钱？", f"{change}块", [f"{w}块" for w in wrong]
    if kind == 4:
        moods = [(f"{a}这次考试考了全班第一，一回家就大声告诉了妈妈。", "很高兴"),
                 (f"{a}在车站等了两个小时，{b}一直没来，电话也打不通。", "很失望"),
                 (f"明天就要上台演讲了，{a}一晚上都睡不着，一遍又一遍地看稿子。", "很紧张"),
                 (f"{a}的自行车刚买了三天就被人偷了。", "很生气")]
        ctx, ans = pick(rng, moods)
        return ctx, f"{a}现在心情怎么样？", ans, rng.sample([m for _, m in moods if m != ans] + ["很无聊"], 3)
    # kind 5: what does the woman mean
    lines = [("这部电影怎么样？", "还不如在家睡觉呢。", "电影不好看"),
             ("这家饭馆的菜怎么样？", "我已经来了五次了。", "饭菜很好吃"),
             ("我们周末去爬山吧？", "天气预报说周末有大雨。", "周末不适合爬山"),
             ("这件衣服我穿着怎么样？", "颜色挺好看的，就是有点儿大。", "衣服不太合身"),
             ("你觉得新来的同事怎么样？", "他总是第一个到办公室，最后一个走。", "新同事很努力")]
    (q_m, a_w, ans), *others = rng.sample(lines, 4)
    ctx = f"男：{q_m}\n女：{a_w}"
    return ctx, "女的是什么意思？", ans, [o[2] for o in others]


def _choice_rows(rng: random.Random, gen, n: int):
    def mk(r):
        ctx, q, ans, wrong = gen(r)
        opts = [ans] + list(wrong)[:3]
        if len(set(opts)) != 4:
            return None
        r.shuffle(opts)
        return {"context": ctx, "question": q, "options": opts, "label": opts.index(ans)}
    return pool_unique(mk, n, rng, key=lambda d: d["context"] + "|" + d["question"])


def make_choice() -> None:
    for lang, gen, seed in (("en", _choice_en, 1013), ("zh", _choice_zh, 1014)):
        rng = random.Random(seed)
        rows = _choice_rows(rng, gen, 300)
        # Contexts never shared between train and dev.
        by_ctx: dict[str, list] = {}
        for r in rows:
            by_ctx.setdefault(r["context"], []).append(r)
        train, dev = [], []
        for ctx_rows in by_ctx.values():
            to_dev = len(dev) < 60 and (rng.random() < 0.25 or len(train) >= 200)
            (dev if to_dev else train).extend(ctx_rows)
        assert len(train) >= 200 and len(dev) >= 60, (lang, len(train), len(dev))
        train, dev = train[:200], dev[:60]
        emit_jsonl(f"choice/{lang}/train.jsonl", train)
        emit_jsonl(f"choice/{lang}/dev.jsonl", dev)
        for name, rs in (("train", train), ("dev", dev)):
            SUMMARY.append(f"choice/{lang}/{name}.jsonl: {len(rs)} questions; answer position "
                           + ", ".join(f"{k}={v}" for k, v in sorted(Counter(r['label'] for r in rs).items())))


# ============================================================================================
# 10. Retrieval pairs for embedding models (data/embed/en_qa, data/embed/zh_qa): question -> its passage
# ============================================================================================

# A sentence ends at . ! ? followed by a space and a capital or digit (the English QA paragraphs have no abbreviations).
_EN_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def answer_sentence(context: str, answer_start: int, title: str) -> str:
    """The sentence of `context` holding the answer, as a passage titled with its article when the sentence does not
    name it ("Upperfold: The current mayor, Samuel Brandt, was elected in 2021."), as passage corpora are."""
    start = 0
    for piece in _EN_SENTENCE_END.split(context):
        begin = context.index(piece, start)
        start = begin + len(piece)
        if begin <= answer_start < start:
            return piece if title.lower() in piece.lower() else f"{title}: {piece}"
    raise ValueError(f"answer at {answer_start} outside its context")


def make_embed() -> None:
    """Each answerable question of the QA samples with its positive, as {"query", "positive"} JSON lines. English:
    the sentence holding the answer, titled (answer_sentence): every question names its article's invented entity,
    so whole paragraphs would be found by the name alone (the base all-MiniLM-L6-v2 ranked them perfectly); among
    several passages of the same entity the question's own aspect (who designed it, what it cost) decides. Chinese:
    the paragraph. Built from the QA outputs (so after make_qa_en / make_qa_zh), which are split by paragraph: no
    passage is a positive in both train and dev. No randomness: rows follow the QA files' order."""
    for lang in ("en", "zh"):
        for split in ("train", "dev"):
            doc = json.loads(OUTPUTS[f"qa/{lang}/{split}.json"])
            rows = [{"query": qa["question"],
                     "positive": answer_sentence(par["context"], qa["answers"][0]["answer_start"], article["title"])
                     if lang == "en" else par["context"]}
                    for article in doc["data"] for par in article["paragraphs"] for qa in par["qas"]
                    if not qa.get("is_impossible")]
            emit_jsonl(f"embed/{lang}_qa/{split}.jsonl", rows)
            SUMMARY.append(f"embed/{lang}_qa/{split}.jsonl: {len(rows)} questions over "
                           f"{len({r['positive'] for r in rows})} {'sentences' if lang == 'en' else 'paragraphs'}")


# ============================================================================================
# Main
# ============================================================================================

MAKERS = [make_en_sentiment, make_zh_sentiment, make_en_pair, make_en_multilabel, make_en_regression,
          make_long_docs, make_corpora, make_ner, make_qa_en, make_qa_zh, make_choice,
          make_embed]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and report files that differ from the ones on disk; write nothing")
    args = ap.parse_args(argv)
    for make in MAKERS:
        make()
    total = sum(len(c.encode("utf-8")) for c in OUTPUTS.values())
    if args.check:
        bad = [rel for rel, c in OUTPUTS.items()
               if not (DATA / rel).is_file() or (DATA / rel).read_bytes() != c.encode("utf-8")]
        for rel in bad:
            print(f"differs: data/{rel}")
        print(f"{len(OUTPUTS) - len(bad)}/{len(OUTPUTS)} files identical")
        return 1 if bad else 0
    for rel, content in OUTPUTS.items():
        path = DATA / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:  # newline="": keep "\n" on every platform
            f.write(content)
    print("\n".join(SUMMARY))
    print(f"wrote {len(OUTPUTS)} files under {DATA}, {total / 1024:.0f} KB in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
