"""magnetar.protocol"""
