"""The vocabularies behind the synthetic OffQuery generator: attributes, their values, and hypotheses.

An *attribute* is something an agent can observe (temperature, river level). Each value of an attribute has
one or two fixed sentences that state it, and a short *criterion* phrase used in option texts. An attribute
belongs to one role (the department or stakeholder who observes it).

A *hypothesis* (an option: a diagnosis, a response strategy) is defined by criteria: attribute -> value.
The option text lists its criteria, so the decision rule is explicit: see
:func:`groundstate.eval.benchmarks.offquery.synthetic_rule.reference_solve`.

All sentences are written for this project; none comes from a data set.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Value:
    sentences: tuple[str, ...]
    criterion: str


@dataclass(frozen=True)
class Attribute:
    name: str
    role: str
    values: dict[str, Value]


@dataclass(frozen=True)
class Hypothesis:
    name: str
    criteria: dict[str, str]


@dataclass(frozen=True)
class Domain:
    name: str
    attributes: dict[str, Attribute]
    hypotheses: tuple[Hypothesis, ...]
    roles: tuple[str, ...]
    settings: tuple[str, ...]
    max_t2_facts: int
    question: str | None
    corroboration_prefixes: tuple[str, ...] = field(default=())

    def option_text(self, hypothesis: Hypothesis) -> str:
        crit = "; ".join(self.attributes[a].values[v].criterion for a, v in hypothesis.criteria.items())
        return f"{hypothesis.name} (indicated by: {crit})"


def _attr(name: str, role: str, **values: tuple[tuple[str, ...], str]) -> Attribute:
    return Attribute(name, role, {k: Value(tuple(s), c) for k, (s, c) in values.items()})


HEALTHCARE = Domain(
    name="healthcare",
    roles=("vital signs", "symptoms", "history", "physical exam", "laboratory", "imaging", "cardiology"),
    attributes={a.name: a for a in [
        _attr("temperature", "vital signs",
              fever=(("Temperature is 39.2 °C.", "Measured temperature is 38.9 °C."), "temperature above 38.5 °C"),
              normal=(("Temperature is 36.8 °C.", "Measured temperature is 37.0 °C."), "normal temperature")),
        _attr("heart_rate", "vital signs",
              fast=(("Heart rate is 118 beats per minute.", "Pulse is 124 beats per minute."),
                    "heart rate above 100"),
              normal=(("Heart rate is 76 beats per minute.", "Pulse is 72 beats per minute."),
                      "heart rate 60-100")),
        _attr("oxygen", "vital signs",
              low=(("Oxygen saturation is 88% on room air.",), "oxygen saturation below 92%"),
              normal=(("Oxygen saturation is 97% on room air.",), "oxygen saturation 95% or above")),
        _attr("blood_pressure", "vital signs",
              low=(("Blood pressure is 84/50 mmHg.",), "systolic blood pressure below 90 mmHg"),
              normal=(("Blood pressure is 124/78 mmHg.",), "normal blood pressure")),
        _attr("cough", "symptoms",
              productive=(("The patient reports a cough producing yellow sputum.",), "productive cough"),
              dry=(("The patient reports a dry cough without sputum.",), "dry cough"),
              none=(("The patient denies any cough.",), "no cough")),
        _attr("chest_pain", "symptoms",
              pleuritic=(("Chest pain is sharp and worse on deep breathing.",), "pleuritic chest pain"),
              pressure=(("Chest pain is a heavy pressure spreading to the left arm.",), "pressure-like chest pain"),
              none=(("The patient denies chest pain.",), "no chest pain")),
        _attr("immobility", "history",
              recent=(("The patient had hip surgery eleven days ago and has been mostly bedbound.",),
                      "recent surgery or immobility"),
              none=(("The patient has been fully mobile with no recent surgery.",), "no recent immobility")),
        _attr("smoking", "history",
              smoker=(("The patient has smoked a pack a day for 30 years.",), "long smoking history"),
              never=(("The patient has never smoked.",), "never smoked")),
        _attr("crackles", "physical exam",
              focal=(("Auscultation reveals crackles over the right lower lobe.",), "focal crackles"),
              bilateral=(("Auscultation reveals fine crackles at both lung bases.",), "crackles at both lung bases"),
              none=(("The lungs are clear on auscultation.",), "clear lungs on auscultation")),
        _attr("leg_swelling", "physical exam",
              one_leg=(("The left calf is swollen and tender.",), "one swollen calf"),
              both_legs=(("There is pitting edema of both ankles.",), "swelling of both ankles"),
              none=(("There is no leg swelling.",), "no leg swelling")),
        _attr("wbc", "laboratory",
              high=(("White cell count is 16.2 x10^9/L.",), "white cell count above 11 x10^9/L"),
              normal=(("White cell count is 7.1 x10^9/L.",), "normal white cell count")),
        _attr("troponin", "laboratory",
              high=(("Troponin I is elevated at 2.4 ng/mL.",), "elevated troponin"),
              normal=(("Troponin I is normal at 0.01 ng/mL.",), "normal troponin")),
        _attr("d_dimer", "laboratory",
              high=(("D-dimer is elevated at 3.1 mg/L.",), "elevated D-dimer"),
              normal=(("D-dimer is normal at 0.3 mg/L.",), "normal D-dimer")),
        _attr("bnp", "laboratory",
              high=(("BNP is elevated at 1450 pg/mL.",), "elevated BNP"),
              normal=(("BNP is normal at 40 pg/mL.",), "normal BNP")),
        _attr("chest_xray", "imaging",
              consolidation=(("Chest X-ray shows right lower lobe consolidation.",), "lobar consolidation on X-ray"),
              congestion=(("Chest X-ray shows bilateral vascular congestion and an enlarged heart.",),
                          "vascular congestion on X-ray"),
              hyperinflation=(("Chest X-ray shows hyperinflated lungs.",), "hyperinflated lungs on X-ray"),
              clear=(("Chest X-ray shows clear lung fields.",), "clear chest X-ray")),
        _attr("ecg", "cardiology",
              st_elevation=(("ECG shows ST elevation in leads II, III and aVF.",), "ST elevation on ECG"),
              sinus_tachycardia=(("ECG shows sinus tachycardia without ST changes.",), "sinus tachycardia on ECG"),
              normal=(("ECG shows normal sinus rhythm.",), "normal ECG")),
    ]},
    hypotheses=(
        Hypothesis("Community-acquired pneumonia",
                   {"temperature": "fever", "cough": "productive", "chest_xray": "consolidation", "wbc": "high"}),
        Hypothesis("Pulmonary embolism",
                   {"d_dimer": "high", "immobility": "recent", "chest_pain": "pleuritic", "ecg": "sinus_tachycardia"}),
        Hypothesis("Acute myocardial infarction",
                   {"troponin": "high", "chest_pain": "pressure", "ecg": "st_elevation"}),
        Hypothesis("Acute heart failure",
                   {"bnp": "high", "leg_swelling": "both_legs", "chest_xray": "congestion", "crackles": "bilateral"}),
        Hypothesis("COPD exacerbation",
                   {"smoking": "smoker", "chest_xray": "hyperinflation", "oxygen": "low", "cough": "productive"}),
        Hypothesis("Acute viral bronchitis",
                   {"cough": "dry", "chest_xray": "clear", "wbc": "normal", "crackles": "none"}),
        Hypothesis("Deep vein thrombosis",
                   {"leg_swelling": "one_leg", "d_dimer": "high", "immobility": "recent"}),
        Hypothesis("Septic shock",
                   {"blood_pressure": "low", "temperature": "fever", "heart_rate": "fast", "wbc": "high"}),
        Hypothesis("Panic attack",
                   {"heart_rate": "fast", "troponin": "normal", "ecg": "sinus_tachycardia", "oxygen": "normal"}),
        Hypothesis("Pericarditis",
                   {"chest_pain": "pleuritic", "troponin": "normal", "temperature": "fever", "ecg": "st_elevation"}),
    ),
    settings=("A {age}-year-old {sex} presents to the emergency department with {complaint}.",),
    max_t2_facts=10,
    question=("Which diagnosis is most likely? Each option lists the findings that indicate it; choose the "
              "option whose findings the patient's reliable information satisfies best."),
    corroboration_prefixes=("Also recorded at handover: ", "Noted in the referral letter: ", "Per the ward note: "),
)

DISASTER = Domain(
    name="disaster",
    roles=("weather service", "transport", "fire and rescue", "utilities", "public health", "shelter coordination"),
    attributes={a.name: a for a in [
        _attr("river_level", "weather service",
              rising=(("The river gauge reads 6.8 m and is rising 20 cm per hour.",), "river level rising"),
              falling=(("The river gauge reads 3.1 m and is falling.",), "river level falling")),
        _attr("wind", "weather service",
              severe=(("Sustained winds are 95 km/h with gusts above 120 km/h.",), "severe winds"),
              calm=(("Winds are light at 10 km/h.",), "light winds")),
        _attr("rain_forecast", "weather service",
              heavy=(("A further 120 mm of rain is forecast in the next 24 hours.",), "heavy rain forecast"),
              dry=(("No further rain is forecast for the next 48 hours.",), "dry forecast")),
        _attr("main_road", "transport",
              open=(("Highway 9 north is open in both directions.",), "Highway 9 open"),
              closed=(("Highway 9 north is closed by a landslide at kilometre 14.",), "Highway 9 closed")),
        _attr("bridge", "transport",
              sound=(("The Mill Street bridge was inspected and is structurally sound.",), "Mill Street bridge sound"),
              damaged=(("The Mill Street bridge has a cracked pier and is closed to traffic.",),
                       "Mill Street bridge damaged")),
        _attr("fire", "fire and rescue",
              active=(("A wildfire is burning 4 km west of town and spreading east.",), "active wildfire nearby"),
              contained=(("The nearby wildfire is fully contained.",), "wildfire contained")),
        _attr("trapped", "fire and rescue",
              yes=(("Rescue teams report 12 people trapped on rooftops in the low-lying district.",),
                   "people trapped on rooftops"),
              no=(("No people are reported trapped.",), "nobody trapped")),
        _attr("helicopters", "fire and rescue",
              available=(("Two rescue helicopters are available at the airfield.",), "helicopters available"),
              grounded=(("All rescue helicopters are grounded for maintenance.",), "helicopters grounded")),
        _attr("power", "utilities",
              out=(("Power is out across the eastern districts.",), "power outage"),
              on=(("Power is on across all districts.",), "power on")),
        _attr("water", "utilities",
              contaminated=(("Tap water in the low-lying district tested positive for E. coli.",),
                            "tap water contaminated"),
              safe=(("Tap water tested safe at all sampling points.",), "tap water safe")),
        _attr("gas_leak", "utilities",
              yes=(("A gas main rupture has been reported on Elm Avenue.",), "gas main rupture"),
              no=(("No gas leaks have been reported.",), "no gas leaks")),
        _attr("hospital", "public health",
              overwhelmed=(("The regional hospital is at 130% capacity and diverting ambulances.",),
                           "regional hospital overwhelmed"),
              normal=(("The regional hospital is operating normally with spare beds.",),
                      "regional hospital has spare capacity")),
        _attr("shelter", "shelter coordination",
              available=(("The high school shelter has 400 free beds.",), "shelter beds available"),
              full=(("All public shelters are at full capacity.",), "shelters full")),
    ]},
    hypotheses=(
        Hypothesis("Evacuate the low-lying district by road to the high school shelter",
                   {"river_level": "rising", "main_road": "open", "shelter": "available"}),
        Hypothesis("Shelter in place and distribute bottled water",
                   {"river_level": "falling", "water": "contaminated", "main_road": "closed"}),
        Hypothesis("Launch a helicopter rooftop rescue",
                   {"trapped": "yes", "helicopters": "available", "wind": "calm"}),
        Hypothesis("Cut fuel to the western slopes with a firebreak and evacuate westward homes",
                   {"fire": "active", "rain_forecast": "dry", "main_road": "open"}),
        Hypothesis("Issue a boil-water advisory and open mobile clinics",
                   {"water": "contaminated", "hospital": "overwhelmed", "power": "on"}),
        Hypothesis("Shut off the gas supply and cordon the eastern districts",
                   {"gas_leak": "yes", "power": "out", "wind": "severe"}),
        Hypothesis("Transfer patients to neighbouring hospitals across the Mill Street bridge",
                   {"hospital": "overwhelmed", "bridge": "sound", "main_road": "open"}),
        Hypothesis("Reinforce levees with sandbags and keep residents in place",
                   {"river_level": "rising", "rain_forecast": "heavy", "shelter": "full"}),
        Hypothesis("Stand down the emergency operation and begin recovery",
                   {"river_level": "falling", "rain_forecast": "dry", "trapped": "no"}),
    ),
    settings=("Situation overview: day {day} of the response to {event} in {town}. "
              "Teams are coordinating the next operational period.",),
    max_t2_facts=16,
    question=None,
    corroboration_prefixes=("Relayed by the liaison officer: ", "Reported at the morning briefing: ",
                            "Confirmed by field teams: "),
)

DOMAINS = {"healthcare": HEALTHCARE, "disaster": DISASTER}

COMPLAINTS = ("shortness of breath", "chest discomfort", "fatigue and breathlessness", "feeling unwell for days")
EVENTS = ("a severe storm", "river flooding", "a regional emergency", "storm and flood damage")
TOWNS = ("Riverton", "Eastbrook", "Millford", "Ashdale", "Norcliff")
