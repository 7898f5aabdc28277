"""Tools for the staff who run the knowledge base: hit testing (``hit_testing``,
``hit_test_cards``) and thresholds fitted on their own labelled questions
(``calibration_queries``)."""
