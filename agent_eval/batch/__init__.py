"""The batch: preflight, packing, consumer, schedule, attempts, receipts."""
