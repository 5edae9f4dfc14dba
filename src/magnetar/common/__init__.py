"""magnetar.common"""
