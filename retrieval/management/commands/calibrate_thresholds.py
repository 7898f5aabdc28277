"""Suggest HIGHLY_RELEVANT / REFERENCE thresholds from your own labelled questions.

    python manage.py calibrate_thresholds --queries my_questions.jsonl
    python manage.py calibrate_thresholds --queries my_questions.jsonl --apply --user admin
    python manage.py calibrate_thresholds --queries my_questions.jsonl --refit [--apply]
    python manage.py calibrate_thresholds --from-feedback --refit [--apply]

``--refit`` refits the level model (RETRIEVAL_LEVELS=model) on your questions instead: fitted on a
seeded half, judged on the other, refused when it does worse there than the model in force;
``--apply`` then writes it as the embedding model's level profile (retrieval/lookup/level_profiles/).
``--from-feedback`` refits on the lookups staff and agents judged instead of a file
(retrieval/staff/feedback_refit.py: one vote per call, no agent counting for more than a third).

The rule and the file format: retrieval/staff/labelled_queries.py, retrieval/staff/calibration_queries.py and docs/lookup.md
("Calibrating with your own questions").
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from retrieval.lookup.thresholds import current_thresholds, thresholds_cache_clear
from retrieval.staff.calibration_queries import (
    DEFAULT_MIN_ANSWERS,
    DEFAULT_TARGET_HIGHLY_RELEVANT,
    DEFAULT_TARGET_REFERENCE,
    evidence_bands,
    levels_outcome,
    lookup_level_function,
    suggestion_apply,
    thresholds_suggest,
)
from retrieval.staff.labelled_queries import LabelledQueriesError, labelled_queries_read, queries_observe


def _share(value) -> str:
    return "-" if value is None else f"{value:.3f}"


class Command(BaseCommand):
    help = (
        'Ask your labelled questions (JSON lines: {"query": ..., "expected": "<doc_key>" or null}) '
        "as dry-run lookups on the current model and corpus, print the evidence per similarity band and "
        "suggest the thresholds: of every pair of similarity cut-offs (0.01 grid), put through the "
        "lookup's own level decision (lexical evidence included), the one that returns the most right "
        "answers while HIGHLY_RELEVANT answers are right at least --target-highly-relevant of the time "
        "(else that level is put out of reach, 1.00) and REFERENCE answers at least --target-reference; "
        "ties: more right answers at HIGHLY_RELEVANT, fewer wrong ones, then the middle of the equal "
        "pairs. PRECISE keyword answers do not depend on "
        "thresholds and are left out. --apply "
        "stores the pair as a threshold calibration (the record staff apply from feedback; revert it in "
        "the admin's threshold calibration page)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--queries", metavar="FILE.jsonl", help="the labelled questions")
        parser.add_argument(
            "--from-feedback",
            action="store_true",
            help="with --refit: the judged lookups (staff and agents' feedback) instead of --queries",
        )
        parser.add_argument(
            "--apply", action="store_true", help="store the suggested pair as the one in force"
        )
        parser.add_argument(
            "--user", help="the staff user the calibration is recorded under (default: the only superuser)"
        )
        parser.add_argument(
            "--target-highly-relevant",
            type=float,
            default=DEFAULT_TARGET_HIGHLY_RELEVANT,
            help=f"precision HIGHLY_RELEVANT answers must reach (default {DEFAULT_TARGET_HIGHLY_RELEVANT})",
        )
        parser.add_argument(
            "--target-reference",
            type=float,
            default=DEFAULT_TARGET_REFERENCE,
            help=f"precision REFERENCE answers must reach (default {DEFAULT_TARGET_REFERENCE})",
        )
        parser.add_argument(
            "--refit",
            action="store_true",
            help="refit the level model on the questions (fit half / report half) instead of thresholds",
        )
        parser.add_argument(
            "--min-answers",
            type=int,
            default=DEFAULT_MIN_ANSWERS,
            help=f"HIGHLY_RELEVANT must rest on at least this many answers (default {DEFAULT_MIN_ANSWERS})",
        )

    def handle(
        self, *args, queries, apply, user, target_highly_relevant, target_reference, min_answers, **options
    ):
        if options.get("from_feedback") and not options.get("refit"):
            raise CommandError(
                "--from-feedback goes with --refit (thresholds from feedback: the admin's calibration page)"
            )
        if bool(queries) == bool(options.get("from_feedback")):
            raise CommandError("--queries FILE.jsonl or --from-feedback: one of the two")
        if options.get("refit"):
            return self._refit(queries, apply)
        for name, value in (
            ("--target-highly-relevant", target_highly_relevant),
            ("--target-reference", target_reference),
        ):
            if not 0 < value <= 1:
                raise CommandError(f"{name}: must be within (0, 1], got {value}")
        if min_answers < 1:
            raise CommandError(f"--min-answers: must be at least 1, got {min_answers}")
        applied_by = self._user(user) if apply else None
        try:
            labelled = labelled_queries_read(queries)
        except LabelledQueriesError as exc:
            raise CommandError(str(exc)) from exc

        in_force = current_thresholds()
        self.stdout.write(
            f"{len(labelled)} labelled questions; thresholds in force: HIGHLY_RELEVANT {in_force.highly_relevant}, "
            f"REFERENCE {in_force.reference} ({in_force.source})"
        )
        try:
            observations = queries_observe(
                labelled,
                progress=lambda n, total: (
                    self.stderr.write(f"\r  asked {n}/{total}", ending="")
                    if n % 10 == 0 or n == total
                    else None
                ),
            )
        except ValidationError as exc:
            raise CommandError(f"a question could not be asked: {exc}") from exc
        self.stderr.write("")

        self.stdout.write(
            "\nevidence per similarity band (best candidate of each question; PRECISE left out)"
        )
        self.stdout.write(
            f"  {'band':<13}{'answers':>8}{'right':>7}{'precision':>10}   {'from here up:':<14}"
            f"{'answers':>8}{'precision':>10}{'right kept':>11}"
        )
        for band in evidence_bands(observations):
            self.stdout.write(
                f"  {band['lo']:.2f}-{band['hi']:.2f}    {band['answers']:>8}{band['right']:>7}"
                f"{_share(band['precision']):>10}   {'':<14}{band['answers_above']:>8}"
                f"{_share(band['precision_above']):>10}{_share(band['right_kept']):>11}"
            )
        level = lookup_level_function()
        suggestion = thresholds_suggest(
            observations,
            target_highly_relevant=target_highly_relevant,
            target_reference=target_reference,
            min_answers=min_answers,
            level=level,
        )
        unscored = suggestion.questions - suggestion.scored - suggestion.precise
        self.stdout.write(
            f"\n  {suggestion.scored} answers by similarity ({suggestion.right} right, {suggestion.wrong} wrong); "
            f"{suggestion.precise} PRECISE ({suggestion.precise_right} right); {unscored} without any candidate"
        )
        now = levels_outcome(
            observations, highly_relevant=in_force.highly_relevant, reference=in_force.reference, level=level
        )
        self._outcome("in force now", in_force.highly_relevant, in_force.reference, now)
        if not suggestion.ok:
            self.stdout.write(self.style.WARNING(f"\nno suggestion: {suggestion.reason}"))
            if apply:
                raise CommandError(f"nothing applied: {suggestion.reason}")
            return
        self._outcome("suggested", suggestion.highly_relevant, suggestion.reference, suggestion.outcome)
        self.stdout.write(f"  rule: {suggestion.reason}")
        self._wrong_returned(observations, suggestion, level)
        if not apply:
            self.stdout.write("\n(not applied: run again with --apply to make this pair the one in force)")
            return
        calibration = suggestion_apply(
            suggestion=suggestion, observations=observations, applied_by=applied_by, queries_file=str(queries)
        )
        thresholds_cache_clear()
        self.stdout.write(
            self.style.SUCCESS(
                f"\napplied as threshold calibration #{calibration.pk} by {applied_by.get_username()} "
                "(revert it in the admin: Threshold calibration)"
            )
        )

    def _refit(self, queries, apply: bool) -> None:
        from retrieval.lookup.level_model import level_model_save
        from retrieval.lookup.profiles import profile_for
        from retrieval.lookup.thresholds import _model_name, current_level_model
        from retrieval.staff.level_fit import fit, labelled_asked, refit_decide, split_fit_report

        profile = profile_for(_model_name())
        if profile is None:
            raise CommandError("--refit: the embedding model has no profile to fit a level model for")
        if queries is None:
            from retrieval.staff.feedback_refit import FeedbackRefused, feedback_asked

            try:
                asked = feedback_asked()
            except FeedbackRefused as exc:
                raise CommandError(f"--from-feedback: {exc}") from exc
            source, needs = (
                "feedback",
                "both helpful and unhelpful judgements of calls the level model decided",
            )
        else:
            try:
                labelled = labelled_queries_read(queries)
            except LabelledQueriesError as exc:
                raise CommandError(str(exc)) from exc
            asked = labelled_asked(labelled)
            source, needs = str(queries), "both answerable and unanswerable ones"
        fit_half, report_half = split_fit_report(asked)
        if len({q.expected is None for q in fit_half}) < 2:
            raise CommandError(f"--refit: the questions need {needs}")
        try:
            model = fit(fit_half, name=profile.name, fit_set=source)
        except ValueError as exc:
            raise CommandError(f"--refit: {exc}") from exc
        decision = refit_decide(model, current_level_model(), report_half)
        self.stdout.write(
            f"{len(fit_half)} questions fitted on, {len(report_half)} reported on\n"
            f"  refit on the report half:         {decision.new}\n"
            f"  model in force on the report half: {decision.current}"
        )
        if not decision.ok:
            raise CommandError(f"refit refused: {decision.reason}")
        if not apply:
            self.stdout.write("\n(not applied: run again with --apply to write the level profile)")
            return
        model = type(model)(**{**model.__dict__, "fitted": {**model.fitted, "report_half": decision.new}})
        path = level_model_save(model)
        self.stdout.write(self.style.SUCCESS(f"\nwrote {path}"))

    def _outcome(self, label: str, highly_relevant: float, reference: float, outcome: dict) -> None:
        hr, ref = outcome["HIGHLY_RELEVANT"], outcome["REFERENCE"]
        self.stdout.write(
            f"  {label + ':':<14}HIGHLY_RELEVANT >= {highly_relevant:.2f}: {hr['answers']} answers, precision "
            f"{_share(hr['precision'])}; REFERENCE >= {reference:.2f}: {ref['answers']} answers, precision "
            f"{_share(ref['precision'])}; right answers kept {_share(outcome['right_kept'])}, "
            f"wrong ones returned {outcome['wrong_returned']}"
        )

    def _wrong_returned(self, observations, suggestion, level, limit: int = 10) -> None:
        """The wrong answers the suggested pair would still return, most similar first."""
        wrong = sorted(
            (
                o
                for o in observations
                if o.similarity is not None
                and not o.precise
                and not o.right
                and level(o.similarity, o.coverage, suggestion.highly_relevant, suggestion.reference)
            ),
            key=lambda o: -o.similarity,
        )
        if not wrong:
            return
        self.stdout.write(f"  wrong answers it would still return ({len(wrong)}, at most {limit} shown):")
        for o in wrong[:limit]:
            self.stdout.write(
                f"    {o.similarity:.3f}  {o.query[:60]!r} -> {o.answer} (expected {o.expected or 'nothing'})"
            )

    def _user(self, username: str | None):
        users = get_user_model().objects.filter(is_active=True)
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise CommandError(f"--user: no active user '{username}'")
            if not user.is_staff:
                raise CommandError(f"--user: '{username}' is not a staff user")
            return user
        superusers = list(users.filter(is_superuser=True)[:2])
        if len(superusers) != 1:
            raise CommandError("--user: name the staff user the calibration is recorded under")
        return superusers[0]
