"""Made-up functions for training: names, parameters, docs and query templates drawn from word lists.

The word lists are generic: none of their names, objects or values is taken from the real BFCL fixture
(data/bfcl_v4_real), which scores the result.

The hand-written library (:mod:`.schemas`) has 26 functions; a model warmed up on them learns those 26 and, on a
real BFCL case whose functions it has never seen, often answers ``[]`` (BENCHMARKS.md, "experiment=function_call_
smollm2"). Functions made up from a namespace, a verb, an object and typed parameters (each with the words a query
uses for it) teach the general skill instead: read the docs, pick the function whose name matches the request,
and copy each value into the parameter the query's words point to. The functions make no sense as an API
(``weather.estimate_ticket_price(year=..., city=...)``); only their form matters.

Every parameter a function takes comes from a different *family* (no function has both a city and a country), so
the words before a value ("in Paris", "with a radius of 4") say which parameter it fills: the answer stays
unambiguous, as in the hand-written library.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .schemas import BY_NAME, Param, Sampler, Schema, floats, int_lists, ints, pick, str_lists

NAMESPACES = ("math", "finance", "geo", "weather", "sports", "music", "travel", "health", "chemistry", "physics",
              "legal", "history", "biology", "real_estate", "movies", "books", "shopping", "transit", "stats",
              "city_info", "ecology", "education", "jobs", "events")
# (name part, how a query names it)
VERBS = (("get", "get"), ("calculate", "calculate"), ("find", "find"), ("fetch", "fetch"),
         ("estimate", "estimate"), ("lookup", "look up"), ("compute", "compute"), ("search", "search for"),
         ("predict", "predict"), ("retrieve", "retrieve"))
OBJECTS = ("population", "average_rainfall", "area", "volume", "wind_speed", "shipping_cost", "monthly_payment",
           "ticket_price", "flight_status", "hotel_rates", "reviews", "box_office", "calorie_count",
           "exchange_rate", "travel_time", "player_stats", "match_schedule", "insurance_quote", "stock_history",
           "crime_rate", "air_quality", "recipe", "nutrition_facts", "discount", "tax_amount", "carbon_footprint",
           "sunrise_time", "tide_times", "museum_hours", "book_details", "song_lyrics", "movie_showtimes",
           "gene_sequence", "molecular_weight", "boiling_point", "velocity", "kinetic_energy", "probability",
           "median", "standard_deviation", "loan_interest", "rent_estimate", "property_value", "salary_range",
           "job_listings", "event_tickets", "traffic_report", "parking_spots", "vaccine_schedule", "team_roster",
           "election_results", "species_count", "album_tracks", "course_catalog", "energy_usage", "water_usage")

CITIES = ("Paris", "Tokyo", "New York", "London", "Berlin", "Sydney", "Toronto", "Madrid", "Cairo", "Seoul", "Lima",
          "Oslo", "Chicago", "Mumbai", "Rome", "Boston", "Denver", "Nairobi", "Vienna", "Dublin")
COUNTRIES = ("France", "Japan", "Brazil", "Canada", "India", "Kenya", "Germany", "Mexico", "Norway", "Egypt",
             "Australia", "Spain")
COMPANIES = ("Acme Corp", "Globex", "Initech", "Umbrella Inc", "Stark Industries", "Wayne Enterprises", "Tesla",
             "Apple", "Vandelay Industries", "Hooli")
PEOPLE = ("Alice Smith", "Bob Jones", "Carol White", "David Lee", "Emma Brown", "Frank Miller", "Grace Kim",
          "Henry Ford", "Isabel Diaz", "John Doe")
TEAMS = ("Lakers", "Yankees", "Chelsea", "Real Madrid", "Warriors", "Red Sox", "Bulls", "Arsenal")
GENRES = ("jazz", "rock", "comedy", "drama", "horror", "classical", "pop", "science fiction")
LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Portuguese", "Korean", "Hindi")
CATEGORIES = ("electronics", "books", "clothing", "toys", "groceries", "furniture", "sports gear")
SPECIES = ("gray wolf", "bald eagle", "monarch butterfly", "green turtle", "red fox", "honey bee")
ELEMENTS = ("carbon", "oxygen", "iron", "gold", "sodium", "helium", "copper")
DATES = tuple(f"2024-{m:02d}-{d:02d}" for m in (2, 5, 8, 11) for d in (3, 14, 25))
TICKERS = ("AAPL", "MSFT", "GOOGL", "AMZN", "TSLA", "NVDA", "META", "IBM")
UNITS = ("metric", "imperial")
WORDS = ("apple", "river", "cloud", "stone", "maple", "ocean", "piano", "tiger")


@dataclass(frozen=True)
class ParamSpec:
    """A parameter a made-up function may take: its JSON type, doc text, sampler, and the phrases a query writes
    it with (``{}`` is the value). ``family``: at most one parameter of a family per function."""

    name: str
    type: str
    description: str
    sample: Sampler
    phrases: tuple[str, ...]
    family: str


def _spec(name, type_, description, sample, phrases, family=None) -> ParamSpec:
    return ParamSpec(name, type_, description, sample, phrases, family or name)


PARAMS: tuple[ParamSpec, ...] = (
    _spec("year", "int", "The year.", ints(1950, 2025), ("in {}", "for the year {}"), "time"),
    _spec("date", "str", "The date in YYYY-MM-DD format.", pick(*DATES), ("on {}", "for the date {}"), "time"),
    _spec("city", "str", "The name of the city.", pick(*CITIES), ("in {}", "for {}"), "place"),
    _spec("country", "str", "The name of the country.", pick(*COUNTRIES), ("in {}", "for {}"), "place"),
    _spec("company", "str", "The name of the company.", pick(*COMPANIES), ("for the company {}", "of {}"), "who"),
    _spec("person_name", "str", "The full name of the person.", pick(*PEOPLE), ("for {}", "of {}"), "who"),
    _spec("team", "str", "The name of the team.", pick(*TEAMS), ("for the {}", "of the {}"), "who"),
    _spec("ticker", "str", "The stock ticker symbol.", pick(*TICKERS), ("for {}", "of ticker {}"), "who"),
    _spec("amount", "float", "The amount of money in dollars.", floats(50, 20000), ("of {} dollars", "for ${}")),
    _spec("rate", "float", "The annual rate in percent.", floats(0.5, 12, 1), ("at a rate of {}%",
                                                                                  "with a rate of {} percent")),
    _spec("radius", "int", "The radius in meters.", ints(1, 50), ("with a radius of {}", "of radius {}"), "size"),
    _spec("length", "int", "The length in meters.", ints(1, 200), ("with a length of {}", "{} meters long"),
          "size"),
    _spec("base", "int", "The length of the base.", ints(1, 60), ("with a base of {}",), "size"),
    _spec("height", "int", "The height in meters.", ints(1, 100), ("with a height of {}", "{} meters high")),
    _spec("mass", "float", "The mass in kilograms.", floats(0.5, 500, 1), ("with a mass of {} kg",
                                                                          "weighing {} kilograms")),
    _spec("speed", "float", "The speed in meters per second.", floats(1, 90, 1), ("at {} m/s",
                                                                                 "moving at {} meters per second")),
    _spec("temperature", "int", "The temperature in degrees Celsius.", ints(-20, 120), ("at {} degrees",
                                                                                       "at a temperature of {} C")),
    _spec("days", "int", "The number of days.", ints(1, 60), ("over {} days", "for {} days"), "span"),
    _spec("months", "int", "The number of months.", ints(1, 48), ("over {} months", "for {} months"), "span"),
    _spec("limit", "int", "The maximum number of results.", ints(2, 25), ("limited to {} results",
                                                                         "showing at most {} results")),
    _spec("age", "int", "The age in years.", ints(1, 95), ("aged {}", "for someone who is {} years old")),
    _spec("genre", "str", "The genre.", pick(*GENRES), ("in the {} genre", "of genre {}")),
    _spec("language", "str", "The language.", pick(*LANGUAGES), ("in {}", "written in {}"), "place"),
    _spec("category", "str", "The product category.", pick(*CATEGORIES), ("in the {} category",)),
    _spec("species", "str", "The common name of the species.", pick(*SPECIES), ("for the {}", "of the {}"),
          "who"),
    _spec("element", "str", "The chemical element.", pick(*ELEMENTS), ("of {}", "for the element {}"), "who"),
    _spec("units", "str", "The unit system, 'metric' or 'imperial'.", pick(*UNITS), ("in {} units",)),
    _spec("numbers", "list[int]", "The list of numbers.", int_lists(1, 99), ("for the numbers {}",
                                                                              "of the values {}"), "data"),
    _spec("keywords", "list[str]", "The keywords to match.", str_lists(WORDS), ("matching the keywords {}",
                                                                                "with keywords {}"), "data"),
)
# A parameter that the same function can be called with on several values (BFCL's parallel category).
_MULTI_TYPES = ("int", "float", "str")

# Every opener says the verb: the pool holds one function per verb and object, so verb and object name it.
OPENERS = ("{Verb} the {obj} {args}.", "Can you {verb} the {obj} {args}?", "I want to {verb} the {obj} {args}.",
           "Could you {verb} the {obj} {args}?", "Please {verb} the {obj} {args}.", "Help me {verb} the {obj} {args}.")


def _words(snake: str) -> str:
    return snake.replace("_", " ")


def _template(opener: str, verb: str, obj: str, phrases: list[str]) -> str:
    # commas between the phrases: "and" already joins the values of a list or of a parallel call
    args = ", ".join(phrases)
    return opener.format(Verb=verb.capitalize(), verb=verb, obj=_words(obj), args=args)


def make_function(rng: random.Random, name: str, verb_text: str, obj: str) -> Schema:
    """One made-up function: 1-3 required parameters of distinct families, sometimes one optional one."""
    chosen: list[ParamSpec] = []
    families: set[str] = set()
    for spec in rng.sample(PARAMS, len(PARAMS)):
        if spec.family not in families:
            chosen.append(spec)
            families.add(spec.family)
        if len(chosen) == 4:
            break
    n_required = rng.randint(1, 3)
    optional = chosen[n_required] if rng.random() < 0.4 else None
    required = chosen[:n_required]
    params = {s.name: Param(s.type, s.description, s.sample) for s in required}
    if optional is not None:
        default = optional.sample(random.Random(0))
        params[optional.name] = Param(optional.type, optional.description, optional.sample, optional=True,
                                      default=default)
    # one phrase per parameter, fixed per function: the words that point at it
    phrase = {s.name: rng.choice(s.phrases).replace("{}", "{" + s.name + "}") for s in chosen}

    def templates(mentioned: list[ParamSpec]) -> tuple[str, ...]:
        out = []
        for opener in rng.sample(OPENERS, 3):
            order = rng.sample(mentioned, len(mentioned))
            out.append(_template(opener, verb_text, obj, [phrase[s.name] for s in order]))
        return tuple(out)

    groups = {(): templates(required)}
    if optional is not None:
        groups[(optional.name,)] = templates(required + [optional])
    multi = [s for s in required if s.type in _MULTI_TYPES]
    multi_arg = rng.choice(multi).name if multi else None
    described = ", ".join(_words(s.name) for s in required)
    # every call its own values (generate.each_call): scalar arguments only, so "and" joins calls, not list items;
    # built without drawing from rng, so the functions are the same as before these fields existed
    scalar = all(s.type in _MULTI_TYPES for s in required)
    openers = tuple(o.format(Verb=verb_text.capitalize(), verb=verb_text, obj=_words(obj), args="{calls}")
                    for o in OPENERS) if scalar else ()
    return Schema(name, f"{verb_text.capitalize()}s the {_words(obj)} given the {described}.",
                  params, groups, multi_arg=multi_arg, multi_templates=groups[()] if multi_arg else (),
                  openers=openers, call_phrases=tuple(phrase[s.name] for s in required) if scalar else ())


def synthetic_functions(n: int, seed: int) -> tuple[Schema, ...]:
    """``n`` made-up functions, one per verb and object (so a query's verb and object name one function even when
    two functions share a namespace or an object), some namespaced as many BFCL functions are
    (``finance.calculate_loan_interest``); deterministic in ``seed``."""
    rng = random.Random(f"synthetic-functions/{seed}")
    out: dict[tuple[str, str], Schema] = {}
    if n > len(VERBS) * len(OBJECTS):
        raise ValueError(f"at most {len(VERBS) * len(OBJECTS)} made-up functions, asked for {n}")
    while len(out) < n:
        verb, verb_text = rng.choice(VERBS)
        obj = rng.choice(OBJECTS)
        name = f"{verb}_{obj}"
        if rng.random() < 0.5:
            name = f"{rng.choice(NAMESPACES)}.{name}"
        if (verb, obj) not in out and name not in BY_NAME:
            out[verb, obj] = make_function(rng, name, verb_text, obj)
    return tuple(out.values())
